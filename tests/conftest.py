"""Shared fixtures: the real models and the bundled Tiny U-Net."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = ROOT.parent / "shared" / "models"
TINY_UNET = ROOT / "examples" / "models" / "tiny_unet.tflite"

# Real TFLM arena figures of the shared models (their README: tflite-micro wheel, reference kernels).
SHARED_FIGURES = {
    "person_detect.tflite": (55_296, 85_264),
    "keyword_scrambled.tflite": (672, 15_152),
    "micro_speech_quantized.tflite": (5_968, 7_584),
}


def shared_model(name: str) -> Path:
    p = SHARED_MODELS / name
    if not p.exists():
        pytest.skip(f"{p} not present (shared/ is checked out beside the repository)")
    return p


@pytest.fixture
def tiny_unet() -> Path:
    assert TINY_UNET.exists(), "examples/models/tiny_unet.tflite is committed with the repository"
    return TINY_UNET
