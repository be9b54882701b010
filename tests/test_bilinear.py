"""RESIZE_BILINEAR streams row by row: its row window, its StreamChain stage, bit-exact results.

The windows are checked against TFLM's int8 fixed-point row arithmetic (written out here from the
reference kernel's formulas, for every output row of many sizes); the streamed models
(synth.bilinear_seg: an LR-ASPP-like int8 head whose peak is the final RESIZE_BILINEAR) are
checked bit-exact in the tflite-micro wheel as `tinyseg optimize` checks them. The real-kernel
check of the C++ stage is in tests/test_real_kernels.py.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import synth
from conftest import dumps_options, stage_ops

from tinyseg_plugin.checks.verify import verify
from tinyseg_plugin.cli import main
from tinyseg_plugin.contract import customops
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, save_model
from tinyseg_plugin.memory.planner import plan_graph
from tinyseg_plugin.transforms import stream

# (output size, align_corners, half_pixel_centers) of bilinear_seg's final resize: factor 2 and a
# non-integer factor (24x32 -> 40x52 up-samples 12x16 by 3.33 and 3.25), under each setting.
VARIANTS = [
    ((24, 32), False, True),
    ((40, 52), False, True),
    ((24, 32), True, False),
    ((40, 52), True, False),
    ((24, 32), False, False),
    ((17, 23), False, False),
]
IDS = [f"{h}x{w}-{'align' if a else 'half' if p else 'plain'}" for (h, w), a, p in VARIANTS]


def tflm_rows(y: int, in_h: int, out_h: int, align: bool, half: bool) -> tuple[int, int]:
    """The two input rows TFLM's int8 ResizeBilinearInteger blends for output row y."""
    scale = ((1 << 10) * in_h + out_h // 2) // out_h
    if align and out_h > 1:
        scale = ((1 << 10) * (in_h - 1) + (out_h - 1) // 2) // (out_h - 1)
    pos = y * scale + (scale // 2 - (1 << 9) if half else 0)
    trunc = int(pos / (1 << 10))  # C's division truncates towards zero
    return max(trunc, 0), min(int((pos + (1 << 10) - 1) / (1 << 10)), in_h - 1)


@pytest.mark.parametrize("align, half", [(False, True), (True, False), (False, False)])
def test_window_holds_the_rows_tflm_blends(align: bool, half: bool) -> None:
    """Every output row's window holds both rows TFLM reads, for up- and down-sampling by integer
    and non-integer factors; it spans the two rows TFLM blends, with half-pixel centres too (the
    row map's offset term carries the half-row shift). A scale
    of 0 (align_corners from one row: every output row reads row 0) is refused, and so is a scale
    rounded up so far that TFLM's last row reads past the input."""
    for in_h in range(1, 14):
        for out_h in range(1, 45):
            m = stream.bilinear_rows(in_h, out_h, align, half)
            if m is None:  # refused only where TFLM's scale is 0 (align_corners from one row)
                # or where TFLM itself would read a row past the input
                scale = customops.bilinear_scale(in_h, out_h, align)
                assert scale == 0 or tflm_rows(out_h - 1, in_h, out_h, align, half)[0] >= in_h
                continue
            for y in range(out_h):
                lo, hi = m.window(y)
                y0, y1 = tflm_rows(y, in_h, out_h, align, half)
                assert lo <= y0 <= y1 <= hi, (in_h, out_h, y, (lo, hi), (y0, y1))
                assert hi - lo + 1 <= 2


def test_refused_settings_are_not_row_local() -> None:
    """align_corners with half_pixel_centers (TFLM's Prepare refuses it) and other channels are no
    stage, the first not even row-local; float32 rows are a stage (their own row rule)."""
    g = build_graph(synth.bilinear_seg())
    op = [o for o in g.operators if o.opcode == "RESIZE_BILINEAR"][-1]
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    assert stream.kernel_computes(g, op) and stream.is_row_local(g, op)
    op.options.alignCorners = op.options.halfPixelCenters = True
    assert not stream.is_row_local(g, op) and not stream.kernel_computes(g, op)
    op.options.alignCorners = False
    g.tensors[x.index] = dataclasses.replace(x, dtype="FLOAT32", scales=(), zero_points=())
    g.tensors[y.index] = dataclasses.replace(y, dtype="FLOAT32", scales=(), zero_points=())
    assert stream.is_row_local(g, op) and stream.kernel_computes(g, op)
    g.tensors[x.index] = x
    g.tensors[y.index] = dataclasses.replace(y, shape=y.shape[:3] + (y.shape[3] + 1,))
    assert not stream.kernel_computes(g, op)
    assert customops.bilinear_row_rule(1, 5000, False, False) is None  # scale 0: TFLM reads row 0
    # 2 -> 3000 rows: the scale 0.68 rounds up to 1/1024, so TFLM's last row would read row 2
    assert tflm_rows(2999, 2, 3000, False, False)[0] == 2
    assert customops.bilinear_row_rule(2, 3000, False, False) is None


@pytest.mark.parametrize("out, align, half", VARIANTS, ids=IDS)
def test_optimize_streams_the_resizes_bit_exact(
    out, align: bool, half: bool, tmp_path, monkeypatch
) -> None:
    """`tinyseg optimize` puts both RESIZE_BILINEARs inside StreamChains, the head drops below the
    original's, and the result is bit-identical in the tflite-micro wheel (the pipeline's check, and
    again here on other inputs)."""
    monkeypatch.delenv("TFLM_DIR", raising=False)  # the wheel's check, as without a TFLM tree
    src, dst = tmp_path / "m.tflite", tmp_path / "o.tflite"
    save_model(synth.bilinear_seg(out=out, align_corners=align, half_pixel_centers=half), src)
    assert main(["optimize", str(src), "-o", str(dst), "--target", "min"]) == 0
    g, o = build_graph(load_model(src)), build_graph(load_model(dst))
    stages = stage_ops(o)
    assert stages.count("RESIZE_BILINEAR") == 2
    assert not any(op.opcode == "RESIZE_BILINEAR" for op in o.operators)
    assert plan_graph(o).head < plan_graph(g).head
    v = verify(g, o, runs=2, seed=7)
    assert v.identical, v.detail


@pytest.mark.parametrize(
    "fields",
    [{"alignCorners": 1, "halfPixelCenters": 1}, {"alignCorners": 2}],
    ids=["both", "range"],
)
def test_analyze_refuses_a_bilinear_stage_it_cannot_compute(fields, tmp_path, capsys) -> None:
    """The Python side of the C++ refusal (tests/test_real_kernels.py): a StreamChain whose
    RESIZE_BILINEAR stage asks for align_corners with half_pixel_centers, or a field out of range,
    is one line and exit 2 in `tinyseg analyze`."""
    import numpy as np
    from flatbuffers import flexbuffers

    from tinyseg_plugin.ir import modelio
    from tinyseg_plugin.transforms.optimizer import Options, search_plans

    opt = search_plans(build_graph(synth.bilinear_seg()), Options(smallest=True)).graph
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    for op in model.subgraphs[0].operators:
        if op.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
        stages = [st for st in m.get("stages", []) if st.get("op") == "RESIZE_BILINEAR"]
        for st in stages:
            st.setdefault("fields", {}).update(fields)
        if stages:
            op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    path = tmp_path / "bad.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RESIZE_BILINEAR" in err[0], err


def _wheel_rows_read(in_h: int, out_h: int, align: bool, half: bool) -> list[set[int]]:
    """The input rows each output row of a float32 RESIZE_BILINEAR reads in the tflite-micro
    wheel: input row r set to NaN (the others 0) makes NaN every output row that reads it, even
    with weight 0 (NaN * 0 is NaN)."""
    from tflite_micro.python.tflite_micro import runtime

    from tinyseg_plugin.ir.modelio import model_to_bytes

    b = synth.ModelBuilder(dtype="FLOAT32")
    x = b.input([1, in_h, 3, 1])
    y = b.resize_bilinear(x, (out_h, 5), align, half)
    it = runtime.Interpreter.from_bytes(model_to_bytes(b.build([y])), arena_size=1 << 20)
    reads: list[set[int]] = [set() for _ in range(out_h)]
    for r in range(in_h):
        data = np.zeros((1, in_h, 3, 1), dtype=np.float32)
        data[0, r] = np.nan
        it.set_input(data, 0)
        it.invoke()
        out = it.get_output(0)
        for row in np.flatnonzero(np.isnan(out[0]).any(axis=(1, 2))):
            reads[int(row)].add(r)
    return reads


@pytest.mark.parametrize("align, half", [(False, True), (True, False), (False, False)])
def test_float_window_holds_the_rows_the_wheel_reads(align: bool, half: bool) -> None:
    """The float32 row rule (customops.bilinear_float_row_rule, also the C++ stage's) holds every
    input row TFLM's float kernel reads in the tflite-micro wheel, for integer and non-integer
    factors up and down; a dyadic factor spans the two rows TFLM blends, half-pixel centres too, and
    any factor at most one row more (where float32 rounding may shift the position)."""
    sizes = [(3, 6), (4, 8), (8, 4), (5, 3), (6, 13), (7, 7), (9, 20), (12, 5), (13, 29), (10, 40)]
    # where float32's rounding puts a row's position just off an integer (the exact position is
    # one): TFLM then reads a row the exact position would not
    rounded = {(False, True): [(7, 23), (13, 11)], (False, False): [(5, 35), (26, 22)]}
    for in_h, out_h in sizes + rounded.get((align, half), [(4, 38), (14, 12)]):
        num, den, offset, before, after = customops.bilinear_float_row_rule(
            in_h, out_h, align, half
        )
        m = stream.RowMap(in_h, out_h, num, den, before, after, offset)
        reduced = den // math.gcd(num, den)
        dyadic = reduced & (reduced - 1) == 0
        for y, rows in enumerate(_wheel_rows_read(in_h, out_h, align, half)):
            lo, hi = m.window(y)
            assert rows and lo <= min(rows) and max(rows) <= hi, (in_h, out_h, y, (lo, hi), rows)
            assert hi - lo + 1 <= 2 + (0 if dyadic else 1)


def test_float_rule_refuses_what_it_does_not_cover() -> None:
    """Sizes past 2^15, align_corners onto one input row, both flags: no rule (no stage)."""
    assert customops.bilinear_float_row_rule(1, 9, True, False) is None
    assert customops.bilinear_float_row_rule(4, 8, True, True) is None
    assert customops.bilinear_float_row_rule(4, (1 << 15) + 1, False, False) is None
    assert customops.bilinear_float_row_rule(0, 8, False, False) is None
    assert customops.bilinear_float_row_rule(4, 8, False, False) == (8, 16, 0, 0, 1)
    assert customops.bilinear_float_row_rule(4, 8, False, True) == (8, 16, -4, 0, 1)
