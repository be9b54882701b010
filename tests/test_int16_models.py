"""The int16 (16x8) models of examples/models/build.py: `tinyseg optimize` streams the DS-CNN
keyword spotter's int16 convolutions and pool (StreamChain's int16 stages) and halves TFLM's arena
head; it streams the YOLOv8n-like detector's SiLU (LOGISTIC and MUL), PAD, SPPF and
RESIZE_NEAREST_NEIGHBOR to the head `analyze --stream` estimates, and the synthetic int16 U-Net
(tests/synth.py int16_unet_chain) through its TRANSPOSE_CONV (int64, int16 or no bias), PADV2 and
PRELU. Each checked bit-exact (in the real kernels when TFLM_DIR is set, else in the tflite-micro
wheel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import synth
from conftest import built_examples, stage_ops

from tinyseg_plugin.cli import main
from tinyseg_plugin.ir import modelio
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.transforms import stream

ROOT = Path(__file__).resolve().parent.parent
# The acceptance bound: `analyze --stream` estimates 16,768 B for this model (TFLM: 32,000 B).
HEAD_BOUND = 17_000


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_examples(tmp_path_factory, ["ds_cnn_int16"])["ds_cnn_int16"]


@pytest.fixture(scope="module")
def yolo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_examples(tmp_path_factory, ["yolo_int16"])["yolo_int16"]


def _head(path: Path, capsys: pytest.CaptureFixture) -> int:
    assert main(["analyze", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["head"]


def test_the_int16_ds_cnn_streams_below_the_bound(
    ds_cnn: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    before = _head(ds_cnn, capsys)
    out = tmp_path / "opt.tflite"
    assert main(["optimize", str(ds_cnn), "-o", str(out), "-q", "--target", "min"]) == 0
    capsys.readouterr()
    after = _head(out, capsys)
    assert after <= HEAD_BOUND < before


def test_the_int16_yolo_streams_to_the_estimate(
    yolo: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every row-local operator of the YOLOv8n-like detector is an int16 stage (LOGISTIC, MUL,
    PAD, RESIZE_NEAREST_NEIGHBOR among them), so `optimize` reaches the head `analyze --stream`
    estimates, below the original's; optimize verifies the output bit-exact."""
    before = _head(yolo, capsys)
    assert main(["analyze", str(yolo), "--stream", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)["stream"]["head"]
    out = tmp_path / "opt.tflite"
    assert main(["optimize", str(yolo), "-o", str(out), "-q", "--target", "min"]) == 0
    capsys.readouterr()
    assert _head(out, capsys) == estimate < before


@pytest.mark.parametrize("bias, prelu", [("INT64", False), (None, False), ("INT16", True)])
def test_the_int16_unet_streams_through_transpose_conv_and_padv2(
    tmp_path: Path, capsys: pytest.CaptureFixture, bias: str | None, prelu: bool
) -> None:
    """The int16 U-Net's TRANSPOSE_CONV (int64 bias, none as TensorFlow's converter writes a
    zero one, or int16, which the stage widens where it adds it; its int64 accumulator row counted
    in the chain's operator scratch) and PADV2 are stages, and with the int16 bias two int16
    PRELUs too, so `optimize` reaches the head `analyze --stream` estimates (before these stages
    the chains stopped at them: docs/results.md); optimize verifies the output bit-exact."""
    path = tmp_path / "int16_unet.tflite"
    modelio.save_model(synth.int16_unet_chain(tconv_bias=bias, prelu=prelu), path)
    before = _head(path, capsys)
    assert main(["analyze", str(path), "--stream", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)["stream"]["head"]
    out = tmp_path / "opt.tflite"
    assert main(["optimize", str(path), "-o", str(out), "-q", "--target", "min"]) == 0
    capsys.readouterr()
    assert _head(out, capsys) == estimate < before
    written = build_graph(modelio.load_model(out))
    stages = stage_ops(written)
    assert {"TRANSPOSE_CONV", "PADV2"} <= set(stages), stages
    assert stages.count("PRELU") == (2 if prelu else 0), stages
    assert not {op.opcode for op in written.operators} & {"TRANSPOSE_CONV", "PADV2", "PRELU"}


def test_an_int16_transpose_conv_with_an_int32_bias_stays_out_of_chains() -> None:
    """TFLM's int16 TRANSPOSE_CONV reads an int64 bias as it is and widens an int16 one; an int32
    one it would read as int64, so the stage refuses it: a gap, with the reason."""
    gaps = stream.stage_gaps(build_graph(synth.int16_unet_chain(tconv_bias="INT32")))
    assert [g.opcode for g in gaps] == ["TRANSPOSE_CONV"]
    assert "int32 bias" in gaps[0].reason and "int64" in gaps[0].reason
