"""Model round trips keep everything and run identically; bad files are refused cleanly."""

from __future__ import annotations

import numpy as np
import pytest
import synth
from conftest import SHARED_FIGURES, shared_model

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.checks.verify import random_inputs
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes, parse_model


@pytest.mark.parametrize("name", sorted(SHARED_FIGURES))
def test_round_trip_keeps_everything_and_runs_identically(name: str) -> None:
    path = shared_model(name)
    original = path.read_bytes()
    model = load_model(path)
    written = model_to_bytes(model)
    again = parse_model(written)
    # Every table survives: same counts, same buffer contents, same metadata and signatures.
    assert len(again.subgraphs) == len(model.subgraphs)
    assert len(again.buffers) == len(model.buffers)
    for a, b in zip(model.buffers, again.buffers):
        assert (a.data is None) == (b.data is None)
        if a.data is not None:
            assert bytes(np.asarray(a.data, np.uint8)) == bytes(np.asarray(b.data, np.uint8))
    assert [m.name for m in model.metadata or []] == [m.name for m in again.metadata or []]
    assert len(model.signatureDefs or []) == len(again.signatureDefs or [])
    for sa, sb in zip(model.subgraphs, again.subgraphs):
        assert len(sa.tensors) == len(sb.tensors) and len(sa.operators) == len(sb.operators)
        for ta, tb in zip(sa.tensors, sb.tensors):
            assert list(ta.shape) == list(tb.shape) and ta.type == tb.type and ta.name == tb.name
            qa, qb = ta.quantization, tb.quantization
            if qa is not None and qa.scale is not None:
                assert list(qa.scale) == list(qb.scale) and list(qa.zeroPoint) == list(qb.zeroPoint)
    # Writing is a fixed point, and buffers are 16-byte aligned.
    assert model_to_bytes(again) == written
    # Same outputs in the real interpreter on several random inputs.
    for seed in range(3):
        x = random_inputs(original, seed)
        for a, b in zip(interpreter.run(original, x), interpreter.run(written, x)):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_buffers_are_16_byte_aligned() -> None:
    data = model_to_bytes(synth.random_unet(3))
    from tinyseg_plugin.ir.schema import fb

    m = fb.Model.GetRootAs(data, 0)
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)
        if b.DataLength():
            pos = b._tab.Vector(b._tab.Offset(4))
            assert pos % 16 == 0


def test_round_trip_of_a_synthetic_model_with_signature_and_metadata() -> None:
    from tinyseg_plugin.ir.schema import fb

    m = synth.random_unet(7)
    md = fb.MetadataT()
    md.name = b"min_runtime_version"
    buf = fb.BufferT()
    buf.data = np.frombuffer(b"1.5.0\0\0\0", np.uint8).copy()
    m.buffers.append(buf)
    md.buffer = len(m.buffers) - 1
    m.metadata = [md]
    sig = fb.SignatureDefT()
    sig.signatureKey = b"serving_default"
    m.signatureDefs = [sig]
    again = parse_model(model_to_bytes(m))
    assert again.metadata[0].name == b"min_runtime_version"
    assert again.signatureDefs[0].signatureKey == b"serving_default"
    assert bytes(np.asarray(again.buffers[md.buffer].data, np.uint8)) == b"1.5.0\0\0\0"


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "too short"),
        (b"hello world, this is text and not a flatbuffer at all", "not a flatbuffer"),
        (b"\x0c\x00\x00\x00XXXX\x00\x00\x00\x00\x00\x00\x00\x00", "wrong file identifier"),
    ],
)
def test_parse_rejects_bad_bytes(data: bytes, message: str) -> None:
    with pytest.raises(TinySegError, match=message):
        parse_model(data)


def test_parse_rejects_truncated_model() -> None:
    data = model_to_bytes(synth.random_unet(1))
    for cut in (len(data) // 3, len(data) // 2, len(data) - 100):
        with pytest.raises(TinySegError):
            parse_model(data[:cut])
