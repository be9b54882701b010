"""examples/host_stream: a frame streamed into the --stream-io Tiny U-Net through a row source that
reads the PPM file row by row, the mask streamed out through a row sink into a PGM, beside the
original run whole; both masks bit-identical to the tflite-micro wheel's output of the original.
Built by examples/host_stream/build.py against the real-kernel runner's TFLM build (needs
TFLM_DIR, as the other real-kernel tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_UNET

from tinyseg_plugin.checks import interpreter, real_kernels
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, read_model_bytes, save_model
from tinyseg_plugin.transforms.optimizer import Options, search_plans

ROOT = Path(__file__).resolve().parent.parent


def _load_build():
    """examples/host_stream/build.py under its own name: tests/keras_exports.py imports
    examples/models/build.py as ``build`` into the same process."""
    import importlib.util

    path = ROOT / "examples" / "host_stream" / "build.py"
    spec = importlib.util.spec_from_file_location("host_stream_build", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["host_stream_build"] = module
    spec.loader.exec_module(module)
    return module


host_stream_build = _load_build()

HEIGHT, WIDTH = 80, 120  # the Tiny U-Net's input


def frame(height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """A deterministic frame: a red/green gradient on blue with a red disk."""
    y, x = np.mgrid[0:height, 0:width]
    img = np.empty((height, width, 3), np.uint8)
    img[..., 0] = x * 255 // max(width - 1, 1)
    img[..., 1] = y * 255 // max(height - 1, 1)
    img[..., 2] = 96
    img[(x - 70) ** 2 + (y - 35) ** 2 < 20**2] = (230, 40, 40)
    return img


def ppm(img: np.ndarray) -> bytes:
    return f"P6\n{img.shape[1]} {img.shape[0]}\n255\n".encode() + img.tobytes()


def pgm_body(data: bytes) -> bytes:
    """The pixel bytes of a P5 PGM written as 'P5\\nW H\\n255\\n'."""
    assert data.startswith(b"P5\n")
    return data.split(b"\n", 3)[3]


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d:
        pytest.skip("set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads")
    if not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip(f"TFLM_DIR={d} lacks its third-party downloads")
    return host_stream_build.build(d, tmp_path_factory.mktemp("bin") / "host_stream")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The --stream-io Tiny U-Net as optimize writes it by default (no spills) and at --target min
    (rows spilled to the example's RAM storage)."""
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, smallest in (("default", False), ("min", True)):
        r = search_plans(
            build_graph(load_model(TINY_UNET)), Options(stream_io=True, smallest=smallest)
        )
        save_model(r.graph.model, d / f"{name}.tflite")
        out[name] = d / f"{name}.tflite"
    return out


def _run(example: Path, streamed: Path, frame_file: Path) -> subprocess.CompletedProcess:
    d = frame_file.parent
    return subprocess.run(
        [str(example), str(TINY_UNET), str(streamed), str(frame_file)]
        + [str(d / "whole.pgm"), str(d / "streamed.pgm")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("plan", ["default", "min"])
def test_the_streamed_mask_is_the_whole_runs_and_the_wheels(
    example, models, tmp_path, plan
) -> None:
    img = frame()
    (tmp_path / "frame.ppm").write_bytes(ppm(img))
    p = _run(example, models[plan], tmp_path / "frame.ppm")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "80 rows in from the source, 80 rows out to the sink" in p.stdout
    assert "masks identical: 9600 bytes" in p.stdout
    whole = (tmp_path / "whole.pgm").read_bytes()
    streamed = (tmp_path / "streamed.pgm").read_bytes()
    assert whole == streamed and whole.startswith(b"P5\n120 80\n255\n")
    (wheel,) = interpreter.run(read_model_bytes(TINY_UNET), [img[None]])
    assert wheel.dtype == np.uint8 and wheel.shape == (1, HEIGHT, WIDTH, 1)
    expected = wheel.tobytes()  # a UINT8 output goes into the PGM as it is
    assert pgm_body(streamed) == expected
    assert len(set(expected)) > 1  # a mask, not a constant


@pytest.mark.parametrize(
    "data, message",
    [
        (ppm(frame(40, 60)), "the frame's size differs from the original's input (HxW)"),
        (b"P3\n120 80\n255\n", "the frame is not a binary PPM (P6)"),
        (b"P6\n120 80\n65535\n", "the frame's PPM header is not WIDTH HEIGHT 255"),
        (ppm(frame())[:-1], "the frame's pixel bytes are not WIDTH*HEIGHT*3"),
    ],
    ids=["size", "magic", "maxval", "short"],
)
def test_a_bad_frame_is_refused_in_one_line(example, models, tmp_path, data, message) -> None:
    (tmp_path / "frame.ppm").write_bytes(data)
    p = _run(example, models["default"], tmp_path / "frame.ppm")
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and message in lines[0], p.stderr
    assert not (tmp_path / "streamed.pgm").exists()


def test_a_model_without_row_streams_leaves_no_mask(example, tmp_path) -> None:
    """The original given as the streamed model: its Invoke takes no row from the source, the
    example says so and removes the mask it began."""
    (tmp_path / "frame.ppm").write_bytes(ppm(frame()))
    p = _run(example, TINY_UNET, tmp_path / "frame.ppm")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "did not take every frame row" in p.stderr
    assert not (tmp_path / "streamed.pgm").exists()


def test_build_without_a_tree_says_so(monkeypatch, capsys) -> None:
    monkeypatch.delenv(real_kernels.ENV_TFLM, raising=False)
    assert host_stream_build.main(["/nonexistent/host_stream"]) == 1
    assert capsys.readouterr().err == "build.py: no TFLM tree: give --tflm-dir or set TFLM_DIR\n"
