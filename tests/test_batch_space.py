"""A dilated convolution's SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND with the batch left unset: TFLM does
not resize tensors, so it leaves part of a tensor uninitialised and the outputs follow the arena
layout. Such a model is refused; and the layout pass never writes a layout with overlapping live
tensors."""

from __future__ import annotations

import numpy as np
import pytest
import synth

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes
from tinyseg_plugin.ir.schema import fb
from tinyseg_plugin.ir.validate import unsupported
from tinyseg_plugin.memory.planner import offline_conflict, plan_graph
from tinyseg_plugin.pipeline import refuse_unrunnable
from tinyseg_plugin.transforms.passes import Skip, layout
from tinyseg_plugin.transforms.passes.edit import Editor
from tinyseg_plugin.transforms.passes.layout import LayoutRequest, improve_layout


def dilated_identity(stored_batch: int) -> "fb.ModelT":
    """ADD, SPACE_TO_BATCH_ND (block 2x2) whose output stores ``stored_batch`` batches (4 is right,
    1 is what a batch-unset export stores), BATCH_TO_SPACE_ND back, ADD: y = (x + 1) + 1."""
    b = synth.ModelBuilder(dtype="FLOAT32")
    x = b.input([1, 8, 8, 4])
    one = b._tensor([1], "FLOAT32", "one", np.ones(1, np.float32))
    a = b.activation([1, 8, 8, 4], "a")
    b._op("ADD", [x, one], [a], fb.BuiltinOptions.AddOptions, fb.AddOptionsT())
    block = b._tensor([2], "INT32", "block", np.array([2, 2], np.int32))
    pads = b._tensor([2, 2], "INT32", "pads", np.zeros((2, 2), np.int32))
    s2b = b.activation([stored_batch, 4, 4, 4], "s2b")
    b._op(
        "SPACE_TO_BATCH_ND",
        [a, block, pads],
        [s2b],
        fb.BuiltinOptions.SpaceToBatchNDOptions,
        fb.SpaceToBatchNDOptionsT(),
    )
    back = b.activation([1, 8, 8, 4], "back")
    b._op(
        "BATCH_TO_SPACE_ND",
        [s2b, block, pads],
        [back],
        fb.BuiltinOptions.BatchToSpaceNDOptions,
        fb.BatchToSpaceNDOptionsT(),
    )
    y = b.activation([1, 8, 8, 4], "y")
    b._op("ADD", [back, one], [y], fb.BuiltinOptions.AddOptions, fb.AddOptionsT())
    return b.build([y])


def _pinned(g, tensor: int, offset: int):
    ed = Editor(g)
    ed.offline_offsets({tensor: offset})
    return ed.commit().graph


def _names(g) -> dict[str, int]:
    return {t.name: i for i, t in enumerate(g.tensors)}


def test_unset_batch_makes_outputs_follow_the_layout_in_tflm() -> None:
    """Ground truth for the refusal: in the wheel, moving one tensor (a layout with no overlap) changes
    the outputs of the batch-1 model, and not those of the right one."""
    x = np.random.default_rng(0).normal(size=(1, 8, 8, 4)).astype(np.float32)
    for stored, follows in ((4, False), (1, True)):
        g = build_graph(dilated_identity(stored))
        back = _names(g)["back"]
        # 'back' over the bytes 'a' held (dead by then): no live overlap, as the planner sees it
        a_off = plan_graph(g).tensor_buffer(_names(g)["a"]).offset
        moved = _pinned(g, back, a_off)
        assert offline_conflict(moved) is None
        base = interpreter.run(model_to_bytes(g.model), [x])[0]
        other = interpreter.run(model_to_bytes(moved.model), [x])[0]
        if not follows:
            want = (x + np.float32(1)) + np.float32(1)
            assert np.array_equal(base, want) and np.array_equal(other, want)
        else:
            assert not np.array_equal(base, other)


def test_unset_batch_is_refused_with_what_to_do() -> None:
    g = build_graph(dilated_identity(1))
    why = unsupported(g)
    assert why and "stores batch 1" in why and "fixed batch size" in why
    with pytest.raises(TinySegError, match="SPACE_TO_BATCH_ND"):
        refuse_unrunnable(g, "m", verified=True)
    assert unsupported(build_graph(dilated_identity(4))) is None


def test_layout_with_live_overlap_is_never_written(monkeypatch) -> None:
    """Whatever the first-fit proposes, a layout putting live tensors on shared bytes is skipped."""
    g = build_graph(synth.tiny_unet_like())
    p = plan_graph(g)
    monkeypatch.setattr(
        layout, "first_fit", lambda buffers, key: {i: 0 for i in range(len(buffers))}
    )
    r = improve_layout(g, LayoutRequest(p, plan_graph))
    assert isinstance(r, Skip) and "overlap live tensors" in r.reason


def test_analyze_warns_that_the_outputs_follow_the_layout(tmp_path) -> None:
    """analyze plans such a model as TFLM does, and says on stderr that its outputs are garbage."""
    import subprocess
    import sys

    from tinyseg_plugin.ir.modelio import model_to_bytes as serialize

    bad, good = tmp_path / "bad.tflite", tmp_path / "good.tflite"
    bad.write_bytes(serialize(dilated_identity(1)))
    good.write_bytes(serialize(dilated_identity(4)))
    cli = [sys.executable, "-m", "tinyseg_plugin.cli", "analyze"]
    out = subprocess.run(cli + [str(bad)], capture_output=True, text=True)
    assert out.returncode == 0 and "warning" in out.stderr and "fixed batch size" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run(cli + [str(good)], capture_output=True, text=True)
    assert out.returncode == 0 and "warning" not in out.stderr
