"""The real-kernel check: optimized models run as written in a host build of TFLM with
TinySeg's kernels, compared with the original in the same build. Needs TFLM_DIR (a TFLM 90b983c tree
with its third-party downloads); the build is made once and cached (real_kernels.prepare)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
import synth
from conftest import EXAMPLE_MODELS as EXAMPLES
from conftest import SHARED_MODELS, TINY_UNET, dumps_options, stage_ops

from tinyseg_plugin import cli
from tinyseg_plugin.checks import real_kernels
from tinyseg_plugin.checks.verify import LOWERED, REAL_KERNELS, verify
from tinyseg_plugin.contract import customops
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, save_model
from tinyseg_plugin.ir.offline import NAME as OFFLINE_METADATA
from tinyseg_plugin.ir.offline import ONLINE
from tinyseg_plugin.ir.offline import read as offline_offsets
from tinyseg_plugin.transforms.optimizer import Options, search_plans


def _tflm_dir() -> str:
    d = os.environ.get(real_kernels.ENV_TFLM)
    if not d:
        pytest.skip(
            "set TFLM_DIR to a TFLM 90b983c tree with its third-party downloads for the real-kernel check"
        )
    if not (Path(d) / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        pytest.skip(f"TFLM_DIR={d} lacks its third-party downloads")
    return d


@pytest.fixture(scope="module")
def tflm_dir() -> str:
    d = _tflm_dir()
    real_kernels.prepare(d)  # the one build (cached); later calls find it
    return d


def _optimized(graph):
    return search_plans(graph, Options(smallest=True)).graph


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_pass_the_real_kernel_check(
    tflm_dir: str, name: str, example_models: dict
) -> None:
    if name not in example_models:
        pytest.skip(f"{name}: not built and tensorflow is not installed (make models-deps)")
    graph = build_graph(load_model(example_models[name]))
    opt = _optimized(graph)
    assert any(customops.is_tinyseg_op(op) for op in opt.operators)
    # One random input and the three edge cases: ResUNet-a takes about a minute an inference with
    # the reference kernels on a loaded 2-core machine.
    v = verify(graph, opt, runs=1, tflm_dir=tflm_dir, seconds=600)
    assert v.check == REAL_KERNELS and v.identical, v.detail
    assert v.edge_cases == 3


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT32"])
@pytest.mark.parametrize("seed", range(12))
def test_random_unets_pass_the_real_kernel_check(tflm_dir: str, seed: int, dtype: str) -> None:
    """Spill + FetchingConv2D or Fetching, scratch markers (int8), offline layouts (some seeds)."""
    graph = build_graph(synth.random_unet(seed, dtype=dtype))
    v = verify(graph, _optimized(graph), runs=2, seed=seed, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize(
    "out, align, half",
    [
        ((24, 32), False, True),
        ((40, 52), False, True),
        ((24, 32), True, False),
        ((40, 52), True, False),
        ((17, 23), False, False),
    ],
)
def test_streamed_resize_bilinear_passes_the_real_kernel_check(
    tflm_dir: str, out, align: bool, half: bool
) -> None:
    """RESIZE_BILINEAR as a StreamChain stage (factor 2 and non-integer, each align/half setting)
    runs bit-identical to TFLM's own kernel: the C++ stage's rows and row window agree with the
    planner's (a ring too short for the window would fail the kernel's Prepare)."""
    graph = build_graph(synth.bilinear_seg(out=out, align_corners=align, half_pixel_centers=half))
    opt = _optimized(graph)
    stages = stage_ops(opt)
    assert stages.count("RESIZE_BILINEAR") == 2
    v = verify(graph, opt, runs=2, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"alignCorners": 1, "halfPixelCenters": 1}, "align_corners and half_pixel_centers"),
        ({"alignCorners": 2}, ""),  # out of the field's range (contract limits)
    ],
)
def test_the_resize_bilinear_stage_refuses_what_it_cannot_compute(
    tflm_dir: str, tmp_path: Path, fields: dict, reason: str
) -> None:
    """A StreamChain whose RESIZE_BILINEAR stage asks for align_corners with half_pixel_centers
    (TFLM refuses it too), or a field out of range, is refused in Prepare by the C++ kernel: the
    runner exits non-zero, saying why (the Python side refuses it before, so the body is edited
    here past it)."""
    import subprocess

    import numpy as np
    from flatbuffers import flexbuffers

    from tinyseg_plugin.ir import modelio

    opt = _optimized(build_graph(synth.bilinear_seg()))
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    edited = 0
    for op in model.subgraphs[0].operators:
        if op.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
        stages = [st for st in m.get("stages", []) if st.get("op") == "RESIZE_BILINEAR"]
        for st in stages:
            st.setdefault("fields", {}).update(fields)
            edited += 1
        if stages:
            op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    assert edited == 2
    path = tmp_path / "bad.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(24 * 32 * 3))
    p = subprocess.run(
        [str(exe), str(path), str(inputs), str(tmp_path / "out.bin"), "--batches", "1"]
        + ["--arena", str(64 << 20), "--storage", str(real_kernels.STORAGE_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    assert reason in real_kernels.failure_reason(p.stderr), p.stderr[-1500:]


@pytest.mark.parametrize("name", sorted(p.name for p in SHARED_MODELS.glob("*.tflite")) or ["none"])
def test_shared_models_pass_the_real_kernel_check(tflm_dir: str, name: str) -> None:
    path = SHARED_MODELS / name
    if not path.exists():
        pytest.skip(f"{SHARED_MODELS} has no models")
    graph = build_graph(load_model(path))
    v = verify(graph, _optimized(graph), runs=2, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


def _zero_layout(graph) -> None:
    """Every offline-planned offset set to 0: all tensors on top of each other."""
    model = graph.model
    md = next(m for m in model.metadata if m.name.decode() == OFFLINE_METADATA)
    buf = model.buffers[md.buffer]
    raw = bytes(buf.data)
    n = struct.unpack_from("<I", raw, 8)[0]
    values = [0 if v != ONLINE else v for v in struct.unpack_from(f"<{n}i", raw, 12)]
    import numpy as np

    buf.data = np.frombuffer(raw[:12] + struct.pack(f"<{n}i", *values), dtype=np.uint8).copy()


def _spilled(graph):
    """Spilling, fusion and layout only: the passes an offline layout comes with (streaming would
    replace them)."""
    return search_plans(graph, Options(smallest=True, stream=False)).graph


def _broken(case: str):
    """(original, optimized model with every offline offset 0)."""
    if (
        case == "random_unet_0"
    ):  # the optimizer writes an offline layout here (and spills, fuses, marks)
        graph = build_graph(synth.random_unet(0, dtype="INT8"))
        opt = _spilled(graph)
        offsets = offline_offsets(opt.model)
        assert offsets is not None and len({o for o in offsets if o != ONLINE}) > 1
        _zero_layout(opt)
        return graph, build_graph(opt.model)
    from tinyseg_plugin.transforms.passes.layout import with_offsets

    graph = build_graph(
        load_model(TINY_UNET)
    )  # spilled and fused; a zero layout pinned on every activation
    opt = _spilled(graph)
    assert any(customops.is_tinyseg_op(op) for op in opt.operators)
    return graph, with_offsets(
        opt, {t.index: 0 for t in opt.tensors if not t.is_constant and t.elements > 0}
    ).graph


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT32"])
@pytest.mark.parametrize("seed", range(4))
def test_random_unets_with_wider_transpose_convs_pass_the_real_kernel_check(
    tflm_dir: str, seed: int, dtype: str
) -> None:
    """Random U-Nets whose up-sampling TRANSPOSE_CONVs have kernels of 3 and 4 at stride 2 (each
    output row from a band of input rows; the float32 sums in TFLM's scatter order): streamed
    through them, outputs identical to the original's in TFLM with TinySeg's kernels."""
    graph = build_graph(synth.random_unet(seed, dtype, up_kernels=(3, 4)))
    opt = _optimized(graph)
    stages = stage_ops(opt)
    assert "TRANSPOSE_CONV" in stages, stages
    v = verify(graph, opt, runs=2, seed=seed, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT32", "INT16"])
def test_a_detection_heads_grid_streams_bit_exact_in_the_real_kernels(
    tflm_dir: str, dtype: str
) -> None:
    """ADD, MUL and SUB stages with a constant of every row (a YOLOv5 head's grid, rank 4 and 3,
    broadcast over the anchors) and one of one row: each output row reads its own row of the
    constant; outputs identical to the unfused graph's in TFLM with TinySeg's kernels."""
    graph = build_graph(synth.grid_head(dtype=dtype))
    opt = _optimized(graph)
    stages = stage_ops(opt)
    assert {"ADD", "MUL", "SUB"} <= set(stages), stages
    v = verify(graph, opt, runs=2, seed=3, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize("case", ["random_unet_0", "tiny_unet"])
def test_a_broken_offline_layout_fails_the_real_kernel_check(tflm_dir: str, case: str) -> None:
    graph, broken = _broken(case)
    assert set(o for o in offline_offsets(broken.model) if o != ONLINE) == {0}
    try:
        v = verify(graph, broken, runs=1, tflm_dir=tflm_dir)
    except TinySegError as exc:  # TFLM may also refuse or crash on it: a failure either way
        assert "real-kernel check" in str(exc)
        return
    assert v.check == REAL_KERNELS and not v.identical


def test_the_real_kernel_check_runs_in_groups(tflm_dir: str, monkeypatch) -> None:
    """Groups of one run (verify.GROUP_IO_BYTES): one runner process per model and input, the spill
    count checked per group, the same verdicts; a broken layout still fails."""
    from tinyseg_plugin.checks import real_kernels
    from tinyseg_plugin.checks import verify as verify_module

    calls: list[int] = []
    real = real_kernels.run

    def counting(exe, model, batches, *a, **kw):
        calls.append(len(batches))
        return real(exe, model, batches, *a, **kw)

    monkeypatch.setattr(verify_module, "GROUP_IO_BYTES", 1)
    monkeypatch.setattr(real_kernels, "run", counting)
    graph = build_graph(synth.random_unet(1, dtype="INT8"))
    v = verify(graph, _optimized(graph), runs=2, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail
    assert calls == [1] * 10  # 2 random + 3 edge cases, each for both models
    graph, broken = _broken("random_unet_0")
    try:
        assert not verify(graph, broken, runs=1, tflm_dir=tflm_dir).identical
    except TinySegError as exc:
        assert "real-kernel check" in str(exc)


def test_int16_without_bias_in_the_real_kernels(tflm_dir: str) -> None:
    """Point 5 in the C++ FetchingConv2D: the int32 accumulator (overflowing here) and the int64 one."""
    from test_verify_kernels import fused_int16

    for bias_type in (2, 4, 0):
        graph, fused = fused_int16(bias_type)
        v = verify(graph, fused, runs=1, tflm_dir=tflm_dir)
        assert v.check == REAL_KERNELS and v.identical, (bias_type, v.detail)


def test_cli_verify_names_the_check(tflm_dir: str, tmp_path: Path, capsys) -> None:
    graph = build_graph(load_model(TINY_UNET))
    save_model(_optimized(graph).model, tmp_path / "o.tflite")
    rc = cli.main(
        [
            "verify",
            str(TINY_UNET),
            str(tmp_path / "o.tflite"),
            "--runs",
            "1",
            "--tflm-dir",
            tflm_dir,
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "real-kernel check" in out and tflm_dir in out


def test_cli_optimize_with_tflm_dir_reports_the_real_kernel_check(
    tflm_dir: str, tmp_path: Path, capsys
) -> None:
    import json

    rc = cli.main(
        [
            "optimize",
            str(TINY_UNET),
            "-o",
            str(tmp_path / "o.tflite"),
            "--report",
            str(tmp_path / "r.json"),
            "--runs",
            "1",
            "-q",
            "--tflm-dir",
            tflm_dir,
        ]
    )
    out = capsys.readouterr().out
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rc == 0 and "real-kernel check" in out
    assert rep["verified"]["check"] == REAL_KERNELS and "real-kernel check" in rep["verification"]


def test_without_a_tflm_tree_the_fallback_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv(real_kernels.ENV_TFLM, raising=False)
    rc = cli.main(
        [
            "optimize",
            str(TINY_UNET),
            "-o",
            str(tmp_path / "o.tflite"),
            "--report",
            str(tmp_path / "r.json"),
            "--runs",
            "1",
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "fallback check" in out and "lowered to builtins" in out
    import json

    rep = json.loads((tmp_path / "r.json").read_text())
    assert "fallback check" in rep["verification"] and rep["verified"]["check"] == LOWERED
    g = build_graph(load_model(TINY_UNET))
    assert verify(g, build_graph(load_model(tmp_path / "o.tflite")), runs=1).check == LOWERED


def test_a_bad_tflm_dir_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    rc = cli.main(
        [
            "verify",
            str(TINY_UNET),
            str(TINY_UNET),
            "--runs",
            "1",
            "--tflm-dir",
            str(tmp_path / "nope"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "no such directory" in err and len(err.strip().splitlines()) == 1


def test_the_build_is_cached_and_the_users_tree_untouched(tflm_dir: str) -> None:
    from tinyseg_plugin.deploy.tflm_install import INSTALL_DIR

    root = Path(tflm_dir)
    had_install = (root / INSTALL_DIR).exists()
    before = {rel: (root / rel).stat().st_mtime_ns for rel in real_kernels.TREE_FILES}
    exe = real_kernels.prepare(tflm_dir)
    stamp = exe.stat().st_mtime_ns
    assert (
        real_kernels.prepare(tflm_dir) == exe and exe.stat().st_mtime_ns == stamp
    )  # reused, not rebuilt
    assert exe.is_relative_to(real_kernels.cache_root())
    assert {rel: (root / rel).stat().st_mtime_ns for rel in real_kernels.TREE_FILES} == before
    assert (root / INSTALL_DIR).exists() == had_install


def test_cli_verify_of_a_broken_layout_exits_4_in_one_line(
    tflm_dir: str, tmp_path: Path, capsys
) -> None:
    graph, broken = _broken("tiny_unet")
    save_model(broken.model, tmp_path / "b.tflite")
    rc = cli.main(
        [
            "verify",
            str(TINY_UNET),
            str(tmp_path / "b.tflite"),
            "--runs",
            "1",
            "--tflm-dir",
            tflm_dir,
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 4
        and "real-kernel check" in err
        and "differs" in err
        and len(err.strip().splitlines()) == 1
    )


def test_the_real_kernel_check_is_bounded_in_cpu_time(tflm_dir: str) -> None:
    """--time-limit bounds the native runner's CPU time too (an interval timer that survives exec):
    a limit far below one Tiny U-Net inference stops it with the one-line reason."""
    graph = build_graph(load_model(TINY_UNET))
    with pytest.raises(TinySegError, match=r"did not finish running .* s of CPU .*--time-limit"):
        verify(graph, _optimized(graph), runs=1, tflm_dir=tflm_dir, seconds=0.001)


def test_the_real_kernel_check_with_the_originals_outputs_cached(
    tflm_dir: str, monkeypatch
) -> None:
    """The second check runs only the optimized model (checks/output_cache.py); a broken layout or one
    weight byte changed still fails on the cached outputs; another runner executable is a miss."""
    import numpy as np
    from test_verify_cache import _one_weight_byte_changed

    from tinyseg_plugin.checks import output_cache

    models: list[bytes] = []
    real = real_kernels.run

    def counting(exe, model, batches, *a, **kw):
        models.append(model)
        return real(exe, model, batches, *a, **kw)

    monkeypatch.setattr(real_kernels, "run", counting)
    graph = build_graph(synth.random_unet(0, dtype="INT8"))
    opt = _spilled(graph)
    assert verify(graph, opt, runs=1, tflm_dir=tflm_dir).identical
    assert len(models) == 2
    v = verify(graph, opt, runs=1, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail
    assert len(models) == 3  # the original's outputs came from the cache
    assert v.cached == 4 and v.describe().endswith("; original's outputs from the cache")
    _, broken = _broken("random_unet_0")
    try:
        assert not verify(graph, broken, runs=1, tflm_dir=tflm_dir).identical
    except TinySegError as exc:
        assert "real-kernel check" in str(exc)
    assert len(models) == 4
    assert not verify(graph, _one_weight_byte_changed(opt), runs=1, tflm_dir=tflm_dir).identical
    assert len(models) == 5
    monkeypatch.setattr(output_cache, "file_digest", lambda path: "another runner")
    assert verify(graph, opt, runs=1, tflm_dir=tflm_dir).identical
    assert len(models) == 7  # another runner: the original ran again
    # the original's outputs altered and sealed with another secret: a miss, never a wrong verdict
    cache, other = output_cache.cache_dir(), bytes(range(32))
    secret = (cache / output_cache.KEY_FILE).read_bytes()
    for f in cache.glob("*/*.bin"):
        (out,) = output_cache.decode(secret, f.stem, f.read_bytes())
        f.write_bytes(output_cache.encode(other, f.stem, [out ^ np.uint8(1)]))
    v = verify(graph, opt, runs=1, tflm_dir=tflm_dir)
    assert v.identical and v.cached == 0 and len(models) == 9, v.detail


FLOAT_STAGES = {
    "CONV_2D": 4,
    "DEPTHWISE_CONV_2D": 1,
    "RELU6": 1,
    "PAD": 1,
    "MAX_POOL_2D": 2,
    "AVERAGE_POOL_2D": 1,
    "RESIZE_NEAREST_NEIGHBOR": 1,
    "MUL": 1,
    "ADD": 1,
    "RELU": 2,
    "LOGISTIC": 1,
    "TRANSPOSE_CONV": 1,
    "CONCATENATION": 1,
    "QUANTIZE": 1,
    "DEQUANTIZE": 1,
}


@pytest.mark.parametrize("seed", range(3))
def test_float32_stages_stream_bit_exact_in_the_real_kernels(tflm_dir: str, seed: int) -> None:
    """Every float32 stage, QUANTIZE float32 -> int8 and DEQUANTIZE into a float32 stage, inside
    StreamChains TFLM runs with TinySeg's kernels: outputs identical to the unfused graph's."""
    graph = build_graph(synth.float_stages_unet(seed))
    opt = _optimized(graph)
    stages = stage_ops(opt)
    assert {k: stages.count(k) for k in FLOAT_STAGES} == FLOAT_STAGES
    v = verify(graph, opt, runs=2, seed=seed, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


INT16_STAGES = {
    "QUANTIZE": 2,
    "CONV_2D": 4,
    "DEPTHWISE_CONV_2D": 2,
    "RELU": 1,
    "MAX_POOL_2D": 1,
    "AVERAGE_POOL_2D": 1,
    "CONCATENATION": 1,
    "ADD": 1,
    "SUB": 1,
    "MUL": 1,
    "PAD": 1,
    "RESIZE_NEAREST_NEIGHBOR": 1,
    "LOGISTIC": 1,
    "TANH": 1,
    "LEAKY_RELU": 1,
    "RELU6": 1,
    "DEQUANTIZE": 1,
}


@pytest.mark.parametrize("seed", range(3))
def test_int16_stages_stream_bit_exact_in_the_real_kernels(tflm_dir: str, seed: int) -> None:
    """Every int16 (16x8) stage -- CONV_2D with an int64 and an int32 bias, DEPTHWISE_CONV_2D,
    RELU, the pools, ADD, SUB, MUL, PAD, RESIZE_NEAREST_NEIGHBOR, LOGISTIC, TANH, LEAKY_RELU -- with
    QUANTIZE int8 <-> int16
    and DEQUANTIZE int16, inside StreamChains TFLM runs with TinySeg's kernels: outputs identical
    to the unfused graph's."""
    graph = build_graph(synth.int16_stages_chain(seed))
    opt = _optimized(graph)
    stages = stage_ops(opt)
    assert {k: stages.count(k) for k in INT16_STAGES} == INT16_STAGES
    v = verify(graph, opt, runs=2, seed=seed, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


def test_int16_stages_stream_bit_exact_in_the_cmsis_nn_build(tflm_dir: str) -> None:
    """The int16 chain streamed for CMSIS-NN, run in the host CMSIS-NN build of TFLM: the original
    runs TFLM's CMSIS-NN int16 kernels (arm_convolve_wrapper_s16, arm_depthwise_conv_s16,
    arm_max_pool_s16, arm_avgpool_s16, arm_elementwise_add_s16, arm_elementwise_mul_s16), the
    streamed one's CONV_2D, DEPTHWISE_CONV_2D, pool, ADD and MUL stages the same functions on
    their bands and rows (optimized_rows), its other stages the reference int16 arithmetic; the
    outputs are identical."""
    from tinyseg_plugin.checks.verify import arena_for, random_inputs
    from tinyseg_plugin.ir.modelio import model_to_bytes
    from tinyseg_plugin.transforms import stream_search

    downloads = Path(tflm_dir) / "tensorflow/lite/micro/tools/make/downloads"
    if not all((downloads / d).is_dir() for d in ("cmsis", "cmsis_nn")):
        pytest.skip("TFLM_DIR lacks the cmsis and cmsis_nn downloads a CMSIS-NN build needs")
    graph = build_graph(synth.int16_stages_chain())
    choice = stream_search.choose_streaming(graph, "cmsis-nn", "host64", kernel_only=True)
    assert choice.streamed is not None
    exe = real_kernels.prepare(tflm_dir, "cmsis_nn")
    a, b = model_to_bytes(graph.model), model_to_bytes(choice.streamed.graph.model)
    batches = [random_inputs(a, seed) for seed in range(3)]
    want = real_kernels.run(exe, a, batches, arena_for(graph), 600, "the original").outputs
    got = real_kernels.run(exe, b, batches, arena_for(graph), 600, "the streamed model")
    assert got.outputs == want and got.stats["optimized_rows"] > 0, got.stats


def _refusal(tflm_dir: str, tmp_path: Path, model, input_bytes: int) -> str:
    """``model`` (a parsed flatbuffer) run once in the real-kernel runner on zero inputs: its
    stderr (it must fail)."""
    import subprocess

    from tinyseg_plugin.ir import modelio

    path = tmp_path / "bad.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(input_bytes))
    p = subprocess.run(
        [str(exe), str(path), str(inputs), str(tmp_path / "out.bin"), "--batches", "1"]
        + ["--arena", str(64 << 20), "--storage", str(real_kernels.STORAGE_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    return p.stderr


def test_the_int16_convolution_stage_refuses_a_wrong_filter(tflm_dir: str, tmp_path: Path) -> None:
    """An int16 CONV_2D stage whose filter and bias operands are swapped (an int64 filter) is
    refused in Prepare by the C++ kernel, saying why (the Python side refuses it before, so the
    body is edited here past it)."""
    import numpy as np
    from flatbuffers import flexbuffers

    from tinyseg_plugin.ir import modelio

    opt = _optimized(build_graph(synth.int16_stages_chain()))
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    edited = 0
    for op in model.subgraphs[0].operators:
        if op.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
        for st in m.get("stages", []):
            if st.get("op") == "CONV_2D" and not edited:
                ins = st["inputs"]
                ins[1], ins[2] = ins[2], ins[1]
                edited += 1
                op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    assert edited == 1
    stderr = _refusal(tflm_dir, tmp_path, model, 20 * 12 * 3)
    assert "int16 convolution stage needs an int8 filter" in stderr, stderr[-1500:]


def _edited_int16_chain(op_name: str, edit, which: str = "outputs"):
    """The int16 chain optimized, edited by _edited_chain."""
    return _edited_chain(synth.int16_stages_chain(), op_name, edit, which)


def _edited_chain(made, op_name: str, edit, which: str = "outputs"):
    """The model ``made`` optimized, ``edit(stage, body tensor of its output (``which`` "inputs":
    its first input) or None)`` applied to the first stage of ``op_name``: the parsed model."""
    import numpy as np
    from flatbuffers import flexbuffers

    from tinyseg_plugin.ir import modelio

    opt = _optimized(build_graph(made))
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    edited = 0
    for op in model.subgraphs[0].operators:
        if op.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
        for st in m.get("stages", []):
            local = st[which][0] - len(op.inputs) - len(op.outputs)  # inputs, outputs, tensors
            if st.get("op") == op_name and not edited:
                edit(st, m["tensors"][local] if local >= 0 else None)
                edited += 1
                op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    assert edited == 1
    return model


def test_the_int16_logistic_stage_refuses_another_output_scale(
    tflm_dir: str, tmp_path: Path
) -> None:
    """An int16 LOGISTIC stage writing scale 0.001 (TFLM's int16 LOGISTIC needs 2^-15) is refused
    in Prepare by the C++ kernel, saying why (the Python side keeps it out of chains, so the
    body's tensor is edited here past it)."""

    def scale(st: dict, out: dict | None) -> None:
        assert out is not None
        out["scale"] = [0.001]

    model = _edited_int16_chain("LOGISTIC", scale)
    stderr = _refusal(tflm_dir, tmp_path, model, 20 * 12 * 3)
    assert "int16 LOGISTIC or TANH stage writes scale 2^-15" in stderr, stderr[-1500:]


def test_the_int16_relu6_stage_refuses_a_six_beyond_int32(tflm_dir: str, tmp_path: Path) -> None:
    """An int16 RELU6 stage reading a scale of 2^-30 (its six, 6 / scale, leaves int32, where TFLM's
    rounding is undefined) is refused in Prepare by the C++ kernel, saying why (the body's tensor
    is edited past the Python side; the SUB before it accepts the scale)."""

    def scale(st: dict, inp: dict | None) -> None:
        assert inp is not None
        inp["scale"] = [2.0**-30]

    model = _edited_int16_chain("RELU6", scale, which="inputs")
    stderr = _refusal(tflm_dir, tmp_path, model, 20 * 12 * 3)
    assert "int16 RELU6 stage needs an input scale above 6 / 2^31" in stderr, stderr[-1500:]


@pytest.mark.parametrize("dtype", ["INT8", "INT16"])
def test_add_and_sub_stages_refuse_scales_tflm_would_abort_on(
    tflm_dir: str, tmp_path: Path, dtype: str
) -> None:
    """An ADD (int8) or SUB (int16) stage writing a scale of 2^-32 has an output multiplier above 1,
    on which TFLM's QuantizeMultiplierSmallerThanOneExp aborts; the C++ kernel refuses it in
    Prepare instead, saying why (the body's tensor is edited past the Python side)."""

    def scale(st: dict, out: dict | None) -> None:
        assert out is not None
        out["scale"] = [2.0**-32]

    made = synth.channel_pad_chain() if dtype == "INT8" else synth.int16_stages_chain()
    op = "ADD" if dtype == "INT8" else "SUB"
    model = _edited_chain(made, op, scale)
    g = build_graph(made)
    stderr = _refusal(tflm_dir, tmp_path, model, sum(g.tensors[t].nbytes for t in g.inputs))
    assert "ADD or SUB stage's scales give a multiplier outside (0, 1)" in stderr, stderr[-1500:]


def test_the_int8_tanh_stage_refuses_a_shift_past_tflms_arithmetic(
    tflm_dir: str, tmp_path: Path
) -> None:
    """An int8 TANH stage reading a scale of 2^-31 (TFLM's Prepare would compute a negative left
    shift, undefined in its shifts) is refused in Prepare by the C++ kernel, saying why."""

    def scale(st: dict, inp: dict | None) -> None:
        assert inp is not None
        inp["scale"] = [2.0**-31]

    made = synth.more_stages_unet()
    model = _edited_chain(made, "TANH", scale, which="inputs")
    g = build_graph(made)
    stderr = _refusal(tflm_dir, tmp_path, model, sum(g.tensors[t].nbytes for t in g.inputs))
    assert "int8 LOGISTIC or TANH stage needs an input scale in" in stderr, stderr[-1500:]


def test_the_int16_leaky_relu_stage_refuses_an_infinite_alpha(
    tflm_dir: str, tmp_path: Path
) -> None:
    """An int16 LEAKY_RELU stage whose alpha is infinite is refused in Prepare by the C++ kernel,
    saying why (the body is edited past the Python side)."""

    def alpha(st: dict, out: dict | None) -> None:
        st["fields"]["alpha"] = float("inf")

    model = _edited_int16_chain("LEAKY_RELU", alpha)
    stderr = _refusal(tflm_dir, tmp_path, model, 20 * 12 * 3)
    assert "LEAKY_RELU's alpha is not finite" in stderr, stderr[-1500:]


def test_the_int16_mul_stage_refuses_a_zero_point(tflm_dir: str, tmp_path: Path) -> None:
    """An int16 MUL stage reading a chain input of zero point 5 (TFLM's int16 MUL refuses zero
    points other than 0) is refused in Prepare by the C++ kernel, saying why (the Python side
    keeps such a MUL out of chains, so the input's zero point is edited after streaming)."""
    from tinyseg_plugin.ir import modelio

    b = synth.ModelBuilder(dtype="INT16")
    x = b.input([1, 8, 6, 4])
    y = b.conv(b.add(x, b.conv(x, 4, k=1, relu=False), op="MUL"), 4)
    graph = build_graph(b.build([y]))
    opt = _optimized(graph)
    chain = opt.operators[0]
    assert chain.opcode == customops.STREAM_CHAIN and graph.inputs[0] in chain.inputs
    assert "MUL" in [st.op for st in customops.decode(chain).stages]
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].quantization.zeroPoint = [5]
    stderr = _refusal(tflm_dir, tmp_path, model, 8 * 6 * 4 * 2)
    assert "int16 MUL stage needs zero points 0" in stderr, stderr[-1500:]


@pytest.mark.parametrize(
    "bias, prelu, kernel",
    [
        ("INT64", False, 2),
        (None, False, 2),
        ("INT16", True, 2),
        ("INT64", False, 3),
        ("INT16", False, 3),
        (None, False, 4),
    ],
)
def test_the_int16_unet_streams_bit_exact_in_the_real_kernels(
    tflm_dir: str, bias: str | None, prelu: bool, kernel: int
) -> None:
    """The int16 U-Net's TRANSPOSE_CONV (an int64 bias, none, or an int16 one the stage widens as
    it adds it; its int64 accumulator row in op_scratch; a kernel of 3 or 4 at stride 2, each
    output row from a band of two or three input rows), PADV2 (pad value 1234) and, with the
    int16 bias, two int16 PRELUs (alpha over channels, and over width and channels) as stages TFLM
    runs with TinySeg's kernels: outputs identical to the unfused graph's, and TFLM's arena head
    and tail (the runner's RecordingMicroAllocator) the ones the planner gives the original (with
    TFLM's widened-bias scratch) and the streamed model (without it)."""
    import numpy as np

    from tinyseg_plugin.checks.verify import arena_for
    from tinyseg_plugin.ir import modelio
    from tinyseg_plugin.memory.kernels import BuildProfile
    from tinyseg_plugin.memory.planner import plan_graph

    graph = build_graph(synth.int16_unet_chain(tconv_bias=bias, prelu=prelu, tconv_kernel=kernel))
    opt = _optimized(graph)
    stages = stage_ops(opt)
    assert {"TRANSPOSE_CONV", "PADV2"} <= set(stages), stages
    assert stages.count("PRELU") == (2 if prelu else 0), stages
    v = verify(graph, opt, runs=2, seed=2, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail
    exe = real_kernels.prepare(tflm_dir)
    batch = [np.zeros(graph.tensors[graph.inputs[0]].shape, dtype=np.int8)]
    build = BuildProfile("host64-make-recording-tinyseg", 8)  # the runner's TFLM, as installed
    for g in (graph, opt):
        data = modelio.model_to_bytes(g.model)
        ran = real_kernels.run(exe, data, [batch], arena_for(graph), 60, "m")
        plan = plan_graph(g, "reference", build)
        assert (ran.stats["head"], ran.stats["tail"]) == (plan.head, plan.tail.total)


def test_the_int16_prelu_stage_refuses_a_zero_point(tflm_dir: str, tmp_path: Path) -> None:
    """An int16 PRELU stage reading a chain input of zero point 5 is refused in Prepare by the C++
    kernel, saying why: int16 rows have zero point 0 in every stage (the Python side keeps such a
    PRELU out of chains, so the input's zero point is edited after streaming)."""
    from tinyseg_plugin.ir import modelio

    b = synth.ModelBuilder(dtype="INT16")
    x = b.input([1, 16, 12, 4])  # wide convolutions after it: streaming lowers the head
    y = b.conv(b.conv(b.conv(synth._int16_prelu(b, x, [1, 1, 4], 3), 16), 16), 4)
    graph = build_graph(b.build([y]))
    opt = _optimized(graph)
    chain = opt.operators[0]
    assert chain.opcode == customops.STREAM_CHAIN and graph.inputs[0] in chain.inputs
    assert customops.decode(chain).stages[0].op == "PRELU"
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].quantization.zeroPoint = [5]
    stderr = _refusal(tflm_dir, tmp_path, model, 16 * 12 * 4 * 2)
    assert "int16 PRELU stage needs zero points 0" in stderr, stderr[-1500:]


def _edited_unet(op_name: str, edit, **unet):
    """The int16 U-Net (``unet``: int16_unet_chain's arguments) optimized, ``edit(options, stages
    by op)`` applied to the StreamChain whose body holds its ``op_name`` stage: the parsed model."""
    import numpy as np
    from flatbuffers import flexbuffers

    from tinyseg_plugin.ir import modelio

    opt = _optimized(build_graph(synth.int16_unet_chain(**unet)))
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    edited = 0
    for op in model.subgraphs[0].operators:
        if op.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(op.customOptions, dtype=np.uint8).tobytes()))
        stages = {st.get("op"): st for st in m.get("stages", [])}
        if op_name in stages:
            edit(m, stages)
            edited += 1
            op.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    assert edited == 1
    return model


def _swap_filter_and_bias(m: dict, stages: dict) -> None:
    ins = stages["TRANSPOSE_CONV"]["inputs"]  # output shape, filter, input, bias
    ins[1], ins[3] = ins[3], ins[1]


def _int32_row(m: dict, stages: dict) -> None:
    assert m["op_scratch"] == 12 * 8 * 8  # one output row of 12 x 8 int64
    m["op_scratch"] = 12 * 8 * 4  # an int32 row, the int8 stage's


def _paddings_as_pad_value(m: dict, stages: dict) -> None:
    ins = stages["PADV2"]["inputs"]
    ins[2] = ins[1]


@pytest.mark.parametrize(
    "edit, reason",
    [
        (_swap_filter_and_bias, "int16 TRANSPOSE_CONV stage needs an int8 filter"),
        (_int32_row, "op_scratch is smaller than one TRANSPOSE_CONV accumulator row"),
        (_paddings_as_pad_value, "int16 PADV2 takes a constant int16 scalar pad value"),
    ],
    ids=["int64 filter", "int32 row", "int32 pad value"],
)
def test_the_int16_transpose_conv_and_padv2_stages_refuse_malformed_bodies(
    tflm_dir: str, tmp_path: Path, edit, reason: str
) -> None:
    """The C++ kernel's Prepare refuses, saying why, an int16 TRANSPOSE_CONV stage whose filter and
    bias are swapped (an int64 filter), one whose op_scratch holds an int32 row but not its int64
    one, and an int16 PADV2 whose pad value is the int32 paddings (the bodies are edited past the
    Python side, which refuses them first)."""
    op_name = "PADV2" if edit is _paddings_as_pad_value else "TRANSPOSE_CONV"
    stderr = _refusal(tflm_dir, tmp_path, _edited_unet(op_name, edit), 16 * 12 * 3)
    assert reason in stderr, stderr[-1500:]


def _int16_bias_as_alpha(m: dict, stages: dict) -> None:
    stages["PRELU"]["inputs"][1] = stages["TRANSPOSE_CONV"]["inputs"][3]


def _alpha_over_rows(model) -> None:
    """The PRELU alpha of 1 x W x C made W x 1 x C: it varies over rows (the same bytes)."""
    for t in model.subgraphs[0].tensors:
        if t.name.decode().endswith("/alpha") and len(t.shape) == 3 and t.shape[1] > 1:
            t.shape = [t.shape[1], 1, t.shape[2]]
            return
    raise AssertionError("no 1 x W x C alpha")


@pytest.mark.parametrize(
    "edit, reason",
    [
        (_int16_bias_as_alpha, "PRELU needs an int8 alpha of one row"),
        (_alpha_over_rows, "PRELU needs an int8 alpha of one row"),
    ],
    ids=["int16 alpha", "alpha over rows"],
)
def test_the_int16_prelu_stage_refuses_a_malformed_alpha(
    tflm_dir: str, tmp_path: Path, edit, reason: str
) -> None:
    """The C++ kernel's Prepare refuses an int16 PRELU stage whose alpha is the int16 bias of the
    TRANSPOSE_CONV beside it (TFLM's int16 PRELU takes an int8 alpha), and one whose alpha varies
    over rows (the model's alpha tensor reshaped; a row sees one alpha row), saying why."""
    unet = {"tconv_bias": "INT16", "prelu": True}
    if edit is _alpha_over_rows:
        from tinyseg_plugin.ir import modelio

        model = modelio.parse_model(
            modelio.model_to_bytes(_optimized(build_graph(synth.int16_unet_chain(**unet))).model)
        )
        edit(model)
    else:
        model = _edited_unet("PRELU", edit, **unet)
    stderr = _refusal(tflm_dir, tmp_path, model, 16 * 12 * 3)
    assert reason in stderr, stderr[-1500:]


@pytest.mark.parametrize("seed", range(4))
def test_float32_unets_stream_in_the_real_kernels(tflm_dir: str, seed: int) -> None:
    """Float32 random U-Nets: every row-local operator inside a StreamChain, bit-exact."""
    graph = build_graph(synth.random_unet(seed, dtype="FLOAT32"))
    opt = _optimized(graph)
    assert any(op.opcode == customops.STREAM_CHAIN for op in opt.operators)
    v = verify(graph, opt, runs=2, seed=seed, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize("seed", range(3))
def test_float32_geometry_streams_bit_exact_in_the_real_kernels(tflm_dir: str, seed: int) -> None:
    """Float32 stages over odd sizes, strides, dilation, a depth multiplier and SAME pools."""
    graph = build_graph(synth.float_geometry_chain(seed))
    opt = _optimized(graph)
    assert all(op.opcode == customops.STREAM_CHAIN for op in opt.operators)
    v = verify(graph, opt, runs=2, seed=seed, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize(
    "out,align,half",
    [(None, False, True), (None, False, False), ((25, 21), False, True), ((17, 13), True, False)],
)
def test_more_float32_stages_stream_bit_exact_in_the_real_kernels(
    tflm_dir: str, out, align: bool, half: bool
) -> None:
    """SUB, TANH, HARD_SWISH, LEAKY_RELU, PRELU, ELU, PADV2 and RESIZE_BILINEAR (integer and
    non-integer factors, both flags) as float32 stages TFLM runs with TinySeg's kernels: every
    operator inside a StreamChain, outputs identical to the unfused graph's."""
    graph = build_graph(
        synth.float_more_stages(out=out, align_corners=align, half_pixel_centers=half)
    )
    opt = _optimized(graph)
    assert all(op.opcode == customops.STREAM_CHAIN for op in opt.operators)
    v = verify(graph, opt, runs=2, seed=1, tflm_dir=tflm_dir)
    assert v.check == REAL_KERNELS and v.identical, v.detail


@pytest.mark.parametrize(
    "op, fields, reason",
    [
        (
            "RESIZE_BILINEAR",
            {"alignCorners": 1, "halfPixelCenters": 1},
            "align_corners and half_pixel_centers",
        ),
        ("RESIZE_BILINEAR", {"halfPixelCenters": 3}, ""),  # out of the field's range
        ("LEAKY_RELU", {"alpha": float("nan")}, "alpha is not finite"),
        ("LEAKY_RELU", {"alpha": "0.2"}, "LEAKY_RELU needs its alpha"),
    ],
)
def test_the_float32_stages_refuse_what_they_cannot_compute(
    tflm_dir: str, tmp_path: Path, op: str, fields: dict, reason: str
) -> None:
    """A float32 RESIZE_BILINEAR stage asking for align_corners with half_pixel_centers or a field
    out of range, a float32 LEAKY_RELU whose alpha is not finite or not a number: the C++ kernel
    refuses each in Prepare, saying why (the body is edited past the Python side's checks)."""
    import subprocess

    import numpy as np
    from flatbuffers import flexbuffers

    from tinyseg_plugin.ir import modelio

    opt = _optimized(build_graph(synth.float_more_stages()))
    model = modelio.parse_model(modelio.model_to_bytes(opt.model))
    edited = 0
    for o in model.subgraphs[0].operators:
        if o.customOptions is None:
            continue
        m = flexbuffers.Loads(bytearray(np.asarray(o.customOptions, dtype=np.uint8).tobytes()))
        stages = [st for st in m.get("stages", []) if st.get("op") == op]
        for st in stages:
            st.setdefault("fields", {}).update(fields)
            edited += 1
        if stages:
            o.customOptions = np.frombuffer(dumps_options(m), dtype=np.uint8).copy()
    assert edited == 1
    path = tmp_path / "bad.tflite"
    path.write_bytes(modelio.model_to_bytes(model))
    exe = real_kernels.prepare(tflm_dir)
    inputs = tmp_path / "in.bin"
    inputs.write_bytes(bytes(22 * 18 * 3 * 4))
    p = subprocess.run(
        [str(exe), str(path), str(inputs), str(tmp_path / "out.bin"), "--batches", "1"]
        + ["--arena", str(64 << 20), "--storage", str(real_kernels.STORAGE_BYTES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode > 0, p.stderr[-1500:]
    assert reason in real_kernels.failure_reason(p.stderr), p.stderr[-1500:]
