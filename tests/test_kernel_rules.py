"""Kernel memory rules: the tail estimate against the real interpreter, CMSIS-NN scratch
formulas against hand computation, and (with a TFLM checkout) the CMSIS-NN head against
real builds.

Run: pytest -s tests/test_kernel_rules.py   (TFLM_DIR=/path/to/tflite-micro for the probe tests)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import synth
from conftest import SHARED_FIGURES, SHARED_MODELS, TINY_UNET, shared_model
from synth import SAME, VALID, ModelBuilder

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes
from tinyseg_plugin.ir.schema import fb
from tinyseg_plugin.memory.kernels import BuildProfile, cmsis_nn, reference
from tinyseg_plugin.memory.planner import plan_graph, plan_model

OPTS = fb.BuiltinOptions


# ---------------------------------------------------------------- models with more operator types


class OpsBuilder(ModelBuilder):
    """ModelBuilder plus the operators the random U-Nets lack, each with valid quantization."""

    def const_i32(self, values, name: str) -> int:
        arr = np.asarray(values, dtype=np.int32)
        return self._tensor(list(arr.shape), "INT32", name, arr)

    def _out(
        self,
        shape,
        name: str,
        scale: float | None = None,
        zp: int | None = None,
        dtype: str | None = None,
    ) -> int:
        dtype = dtype or self.dtype
        if dtype == "FLOAT32":
            return self._tensor(shape, "FLOAT32", name)
        return self._tensor(
            shape,
            dtype,
            name,
            scales=[scale or self.act_scale],
            zps=[self.act_zero_point if zp is None else zp],
        )

    def fully_connected(self, x: int, units: int, per_channel: bool) -> int:
        depth = self.shapes[x][-1]
        if self.dtype == "INT8":
            w = self.rng.integers(-127, 128, size=(units, depth), dtype=np.int8)
            n = units if per_channel else 1
            scales = self.rng.uniform(0.002, 0.01, size=n)
            wt = self._tensor(
                [units, depth], "INT8", f"fc{len(self.operators)}/w", w, scales, [0] * n, 0
            )
        else:
            wt = self._weights([units, depth], 0, f"fc{len(self.operators)}/w")
        bt = self._bias(units, x, wt, f"fc{len(self.operators)}/b")
        y = self.activation([self.shapes[x][0], units], f"fc{len(self.operators)}")
        self._op(
            "FULLY_CONNECTED",
            [x, wt, bt],
            [y],
            OPTS.FullyConnectedOptions,
            fb.FullyConnectedOptionsT(),
        )
        return y

    def softmax(self, x: int) -> int:
        y = self._out(list(self.shapes[x]), f"softmax{len(self.operators)}", 1 / 256, -128)
        o = fb.SoftmaxOptionsT()
        o.beta = 1.0
        self._op("SOFTMAX", [x], [y], OPTS.SoftmaxOptions, o)
        return y

    def logistic(self, x: int) -> int:
        y = self._out(list(self.shapes[x]), f"logistic{len(self.operators)}", 1 / 256, -128)
        self._op("LOGISTIC", [x], [y])
        return y

    def reshape(self, x: int, shape) -> int:
        s = self.const_i32(shape, f"reshape{len(self.operators)}/shape")
        y = self.activation(list(shape), f"reshape{len(self.operators)}")
        o = fb.ReshapeOptionsT()
        o.newShape = list(shape)
        self._op("RESHAPE", [x, s], [y], OPTS.ReshapeOptions, o)
        return y

    def pad(self, x: int, p: int) -> int:
        n, h, w, c = self.shapes[x]
        pads = self.const_i32([[0, 0], [p, p], [p, p], [0, 0]], f"pad{len(self.operators)}/p")
        y = self.activation([n, h + 2 * p, w + 2 * p, c], f"pad{len(self.operators)}")
        self._op("PAD", [x, pads], [y], OPTS.PadOptions, fb.PadOptionsT())
        return y

    def resize_nearest(self, x: int, factor: int) -> int:
        n, h, w, c = self.shapes[x]
        size = self.const_i32([h * factor, w * factor], f"resize{len(self.operators)}/size")
        y = self.activation([n, h * factor, w * factor, c], f"resize{len(self.operators)}")
        self._op(
            "RESIZE_NEAREST_NEIGHBOR",
            [x, size],
            [y],
            OPTS.ResizeNearestNeighborOptions,
            fb.ResizeNearestNeighborOptionsT(),
        )
        return y

    def strided_slice(self, x: int) -> int:
        n, h, w, c = self.shapes[x]
        begin = self.const_i32([0, 1, 0, 0], f"ss{len(self.operators)}/b")
        end = self.const_i32([n, h, w, c], f"ss{len(self.operators)}/e")
        strides = self.const_i32([1, 1, 2, 1], f"ss{len(self.operators)}/s")
        y = self.activation([n, h - 1, (w + 1) // 2, c], f"ss{len(self.operators)}")
        self._op(
            "STRIDED_SLICE",
            [x, begin, end, strides],
            [y],
            OPTS.StridedSliceOptions,
            fb.StridedSliceOptionsT(),
        )
        return y

    def split(self, x: int, parts: int) -> list[int]:
        n, h, w, c = self.shapes[x]
        axis = self.const_i32(3, f"split{len(self.operators)}/axis")
        ys = [
            self.activation([n, h, w, c // parts], f"split{len(self.operators)}_{i}")
            for i in range(parts)
        ]
        o = fb.SplitOptionsT()
        o.numSplits = parts
        self._op("SPLIT", [axis, x], ys, OPTS.SplitOptions, o)
        return ys

    def split_v(self, x: int, sizes: list[int]) -> list[int]:
        n, h, w, c = self.shapes[x]
        st = self.const_i32(sizes, f"splitv{len(self.operators)}/sizes")
        axis = self.const_i32(3, f"splitv{len(self.operators)}/axis")
        ys = [
            self.activation([n, h, w, s], f"splitv{len(self.operators)}_{i}")
            for i, s in enumerate(sizes)
        ]
        o = fb.SplitVOptionsT()
        o.numSplits = len(sizes)
        self._op("SPLIT_V", [x, st, axis], ys, OPTS.SplitVOptions, o)
        return ys

    def mean(self, x: int) -> int:
        n, h, w, c = self.shapes[x]
        axis = self.const_i32([1, 2], f"mean{len(self.operators)}/axis")
        y = self.activation([n, 1, 1, c], f"mean{len(self.operators)}")
        o = fb.ReducerOptionsT()
        o.keepDims = True
        self._op("MEAN", [x, axis], [y], OPTS.ReducerOptions, o)
        return y

    def mul(self, a: int, b: int) -> int:
        y = self.activation(list(self.shapes[a]), f"mul{len(self.operators)}")
        self._op("MUL", [a, b], [y], OPTS.MulOptions, fb.MulOptionsT())
        return y

    def quantize(self, x: int) -> int:
        y = self._out(list(self.shapes[x]), f"quant{len(self.operators)}", dtype="INT8")
        self._op("QUANTIZE", [x], [y], OPTS.QuantizeOptions, fb.QuantizeOptionsT())
        return y

    def dequantize(self, x: int) -> int:
        y = self._out(list(self.shapes[x]), f"dequant{len(self.operators)}", dtype="FLOAT32")
        self._op("DEQUANTIZE", [x], [y], OPTS.DequantizeOptions, fb.DequantizeOptionsT())
        return y


def random_ops_model(seed: int) -> "fb.ModelT":
    """A small random chain over PAD, RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT(_V), MUL,
    AVERAGE_POOL_2D, MEAN, RESHAPE, FULLY_CONNECTED, SOFTMAX, LOGISTIC, QUANTIZE and DEQUANTIZE."""
    rng = np.random.default_rng(1000 + seed)
    dtype = "INT8" if rng.random() < 0.6 else "FLOAT32"
    quantize_input = dtype == "INT8" and rng.random() < 0.4
    b = OpsBuilder(dtype=dtype, seed=seed)
    c = int(rng.choice([4, 8]))
    if quantize_input:
        b.dtype = "FLOAT32"
        x = b.input([1, 8, 8, c])
        b.dtype = "INT8"
        x = b.quantize(x)
    else:
        x = b.input([1, 8, 8, c])
    x = b.conv(x, c, k=int(rng.choice([1, 3])))
    for _ in range(int(rng.integers(2, 6))):
        kind = rng.choice(["pad", "resize", "slice", "split", "splitv", "mul", "avgpool", "dw"])
        n, h, w, ch = b.shapes[x]
        if kind == "pad" and h < 12:
            x = b.conv(b.pad(x, 1), ch, k=3, padding=VALID)
        elif kind == "resize" and h < 12:
            x = b.resize_nearest(x, 2)
        elif kind == "slice" and h > 2:
            x = b.strided_slice(x)
        elif kind == "split" and ch % 2 == 0:
            l, r = b.split(x, 2)
            x = b.concat([r, l])
        elif kind == "splitv" and ch >= 3:
            parts = b.split_v(x, [1, ch - 1])
            x = b.concat(parts[::-1])
        elif kind == "mul":
            x = b.mul(x, b.conv(x, ch, k=1))
        elif kind == "avgpool" and h >= 2 and w >= 2:
            x = b.pool(x, "AVERAGE_POOL_2D", k=2, stride=2 if h % 2 == 0 else 1, padding=SAME)
        else:
            x = b.depthwise(x, k=int(rng.choice([3, 5])))
    n, h, w, ch = b.shapes[x]
    x = b.reshape(b.mean(x), [1, ch])
    x = b.fully_connected(x, int(rng.choice([3, 10])), per_channel=bool(rng.random() < 0.5))
    x = b.softmax(x) if rng.random() < 0.6 else b.logistic(x)
    if dtype == "INT8" and rng.random() < 0.5:
        x = b.dequantize(x)
    return b.build([x])


# ---------------------------------------------------------------- (a) tail vs the real interpreter


def _tail_cases():
    for name in sorted(SHARED_FIGURES):
        path = SHARED_MODELS / name
        if path.exists():
            yield name, load_model(path), path.read_bytes()
    yield "tiny_unet", load_model(TINY_UNET), TINY_UNET.read_bytes()
    for seed in range(200):
        m = synth.random_unet(seed)
        yield f"unet{seed}", m, model_to_bytes(m)
    for seed in range(40):
        m = random_ops_model(seed)
        yield f"ops{seed}", m, model_to_bytes(m)


def test_reference_tail_matches_the_interpreter() -> None:
    """The shared models, the Tiny U-Net, 200 random U-Nets and 40 random chains of other
    operators: the 64-bit tail estimate (the wheel's build) against print_allocations(), byte
    for byte."""
    n = 0
    for name, model, data in _tail_cases():
        real = interpreter.arena_usage(data)
        plan = plan_model(model)
        assert plan.exact, f"{name}: no rule for {plan.unknown_ops}"
        assert plan.head == real.head, f"{name}: head {plan.head} vs {real.head}"
        assert plan.tail.total == real.tail, f"{name}: tail {plan.tail.total} vs {real.tail}"
        n += 1
    assert n >= 240


def test_tail_categories_add_up() -> None:
    plan = plan_model(load_model(TINY_UNET))
    t = plan.tail
    parts = (
        t.eval_tensors,
        t.node_registrations,
        t.io_tensors,
        t.kernel_data,
        t.scratch_handles,
        t.variables,
        t.fixed,
        t.builtin_data,
    )
    assert sum(parts) == t.total and all(p >= 0 for p in parts)
    assert "wheel" in t.app


def test_cortex_m_tail_of_the_tiny_unet() -> None:
    """A Cortex-M7 build (Makefile, cortex_m_qemu, reference kernels) measured 7,108 bytes of
    tail with RecordingMicroInterpreter and 6,996 with a plain MicroInterpreter (the probe's
    plain_used minus its head): the "cortex-m" target is the plain one."""
    g = build_graph(load_model(TINY_UNET))
    assert plan_graph(g, "reference", BuildProfile("cortex-m-recording", 4)).tail.total == 7_108
    plain = plan_graph(g, "reference", "cortex-m").tail
    assert plain.total == 6_996 and "MicroInterpreter" in plain.app


# ---------------------------------------------------------------- (b) CMSIS-NN formulas by hand


def _one_op(build) -> tuple:
    b = OpsBuilder(dtype="INT8", seed=0)
    y = build(b)
    g = build_graph(b.build([y]))
    return g, g.operators[-1]


def test_cmsis_conv_im2col_buffer() -> None:
    # 3x3 conv over 16 channels, int8: arm_convolve_wrapper_s8_get_buffer_size takes the
    # general path, arm_convolve_s8_get_buffer_size = 2 columns x align4(3*3*16 = 144) x int16
    # = 2 * 144 * 2 = 576, the same with and without ARM_MATH_DSP.
    g, op = _one_op(lambda b: b.conv(b.input([1, 10, 10, 16]), 8, k=3))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True) == [576]
    assert cmsis_nn.scratch_requests_for(g, op, 8, dsp=False) == [576]
    # 3 input channels: rhs_cols = 27, padded to 28 -> 2 * 28 * 2 = 112
    g, op = _one_op(lambda b: b.conv(b.input([1, 10, 10, 3]), 8, k=3))
    assert cmsis_nn.scratch_requests(g, op, 4) == [112]


def test_cmsis_conv_1x1_fast_path() -> None:
    # 1x1, stride 1, no padding: arm_convolve_1x1_s8_fast_get_buffer_size, which is 2*c int16
    # (= 4 * 24 = 96) only for the DSP build compiled by Arm Compiler 6 (__ARMCC_VERSION);
    # with GCC or without DSP it is 0 and TFLM requests nothing (buf_size > 0 test in conv.cc).
    g, op = _one_op(lambda b: b.conv(b.input([1, 10, 10, 24]), 8, k=1))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True) == []
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True, armclang=True) == [96]
    assert cmsis_nn.scratch_requests_for(g, op, 8, dsp=False) == []
    # 1x1 with stride 2 is not the fast path: arm_convolve_wrapper_s8 returns 0 for it.
    g, op = _one_op(lambda b: b.conv(b.input([1, 10, 10, 24]), 8, k=1, stride=2))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True, armclang=True) == []


def test_cmsis_depthwise_buffers() -> None:
    # 3x3 depthwise, multiplier 1, SAME (TFLM padding 1): arm_depthwise_conv_3x3_s8 path -> 0.
    g, op = _one_op(lambda b: b.depthwise(b.input([1, 12, 12, 16]), k=3))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True) == []
    # 5x5: arm_depthwise_conv_s8_opt, arm_depthwise_conv_s8_opt_get_buffer_size_dsp =
    # c * 5 * 5 int16 = 16 * 25 * 2 = 800 with DSP; without DSP the opt kernel needs none.
    g, op = _one_op(lambda b: b.depthwise(b.input([1, 12, 12, 16]), k=5))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True) == [800]
    assert cmsis_nn.scratch_requests_for(g, op, 8, dsp=False) == []
    # depth multiplier 2 (in.c != out.c): arm_depthwise_conv_s8 (generic) -> 0.
    g, op = _one_op(lambda b: b.depthwise(b.input([1, 12, 12, 16]), k=5, multiplier=2))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True) == []


def test_cmsis_average_pool_buffer() -> None:
    # arm_avgpool_s8_get_buffer_size_dsp: one int32 per channel = 4 * 24 = 96 with DSP; 0 without.
    g, op = _one_op(lambda b: b.pool(b.input([1, 8, 8, 24]), "AVERAGE_POOL_2D"))
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True) == [96]
    assert cmsis_nn.scratch_requests_for(g, op, 8, dsp=False) == []
    g, op = _one_op(lambda b: b.pool(b.input([1, 8, 8, 24]), "MAX_POOL_2D"))
    assert cmsis_nn.scratch_requests(g, op, 4) == []


def test_cmsis_transpose_conv_buffers() -> None:
    # 32 input channels (> REVERSE_TCOL_EFFICIENT_THRESHOLD = 16), stride 2: the reverse-conv
    # path. arm_transpose_conv_s8_get_buffer_size = arm_convolve_s8_get_buffer_size(filter 2x2,
    # c = 32) = 2 * 128 * 2 = 512; arm_transpose_conv_s8_get_reverse_conv_buffer_size =
    # in.c * kw * kh * out.c = 32 * 2 * 2 * 16 = 2048. TFLM asks for both, in that order.
    g, op = _one_op(lambda b: b.transpose_conv(b.input([1, 6, 6, 32]), 16, k=2, stride=2))
    assert cmsis_nn.scratch_requests(g, op, 4) == [512, 2048]
    # 8 input channels: the column-buffer path, buf_x = ((w-1)*stride_w + max(kw, stride_h)) * out.c
    # = (5*2 + 2) * 4 = 48, buf_y = max(kh, stride_h) = 2, times int32: 48 * 2 * 4 = 384; the
    # reverse buffer is 0 bytes but is still requested.
    g, op = _one_op(lambda b: b.transpose_conv(b.input([1, 6, 6, 8]), 4, k=2, stride=2))
    assert cmsis_nn.scratch_requests(g, op, 4) == [384, 0]
    # The reference kernel instead keeps an int32 copy of the whole output: 12 * 12 * 4 * 4.
    assert reference.scratch_requests(g, op, 4) == [12 * 12 * 4 * 4]


def test_cmsis_fully_connected_buffers() -> None:
    # Rank-2 output: arm_fully_connected_s8_get_buffer_size is 0 without MVE -> nothing.
    g, op = _one_op(lambda b: b.fully_connected(b.input([1, 64]), 10, per_channel=False))
    assert cmsis_nn.scratch_requests(g, op, 4) == []

    # Rank-4 output with accum depth % 4 == 0 runs as a 1x1 conv: per-tensor weights need a
    # fake per-channel multiplier/shift pair, output_depth * sizeof(int32) * 2 = 10 * 8 = 80,
    # then arm_convolve_1x1_s8_fast_get_buffer_size (0 with GCC, 2 * 64 * 2 = 256 with armclang).
    def rank4(b, per_channel: bool):
        x = b.input([1, 2, 2, 64])
        y = b.fully_connected(x, 10, per_channel)
        b.tensors[y].shape = [1, 2, 2, 10]  # keep_num_dims output
        b.shapes[y] = (1, 2, 2, 10)
        return y

    g, op = _one_op(lambda b: rank4(b, False))
    assert cmsis_nn.scratch_requests(g, op, 4) == [80]
    assert cmsis_nn.scratch_requests_for(g, op, 4, dsp=True, armclang=True) == [80, 256]
    g, op = _one_op(lambda b: rank4(b, True))
    assert cmsis_nn.scratch_requests(g, op, 4) == []


def test_cmsis_persistent_data() -> None:
    # Conv OpData{OpDataConv, int buffer_idx}: 60 bytes on ILP32 -> 64, plus the int8
    # per-channel multiplier and shift (8 channels * 4 = 32 each): 64 + 32 + 32 = 128.
    g, op = _one_op(lambda b: b.conv(b.input([1, 10, 10, 16]), 8, k=3))
    assert cmsis_nn.persistent_bytes(g, op, 4) == 128
    # The reference conv's OpDataConv is 56 bytes on ILP32 -> 64: the same total.
    assert reference.persistent_bytes(g, op, 4) == 128
    # Float conv: CMSIS-NN's conv.cc allocates the per-channel arrays for int8/int16 only.
    b = OpsBuilder(dtype="FLOAT32", seed=0)
    y = b.conv(b.input([1, 10, 10, 16]), 8, k=3)
    g = build_graph(b.build([y]))
    assert cmsis_nn.persistent_bytes(g, g.operators[0], 4) == 64
    assert reference.persistent_bytes(g, g.operators[0], 4) == 64 + 32 + 32


def test_cmsis_svdf_keeps_the_reference_accumulators() -> None:
    # SVDF: arm_svdf_s8_get_buffer_size is 0 without MVE, so cmsis_nn/svdf.cc asks only for
    # the two int32 accumulators the reference kernel asks for: batch * num_filters and
    # batch * num_units (num_filters / rank). keyword_scrambled's first SVDF: 64 filters, rank 1.
    g = build_graph(load_model(shared_model("keyword_scrambled.tflite")))
    svdf = [op for op in g.operators if op.opcode == "SVDF"]
    assert svdf and cmsis_nn.scratch_requests(g, svdf[0], 4) == [64 * 4, 64 * 4]
    for op in svdf:
        assert cmsis_nn.scratch_requests(g, op, 4) == reference.scratch_requests(g, op, 4)


# ---------------------------------------------------------------- (c) against real TFLM builds


def _probe():
    tflm_dir = os.environ.get("TFLM_DIR")
    if not tflm_dir:
        pytest.skip("set TFLM_DIR to a TFLM checkout with its downloads to run the probe tests")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "tflm_probe"))
    import build_probe

    return Path(tflm_dir), build_probe


def _probe_models(tmp_path: Path) -> list[Path]:
    """The shared models, the Tiny U-Net, and 12 random U-Nets and 12 random operator chains."""
    paths = sorted(SHARED_MODELS.glob("*.tflite")) + [TINY_UNET]
    for seed in range(12):
        for name, model in (
            (f"unet{seed}", synth.random_unet(seed)),
            (f"ops{seed}", random_ops_model(seed)),
        ):
            p = tmp_path / f"{name}.tflite"
            p.write_bytes(model_to_bytes(model))
            paths.append(p)
    return paths


@pytest.mark.parametrize("target", ["host", "cortex_m7"])
def test_cmsis_nn_head_matches_real_builds(target: str, tmp_path: Path) -> None:
    """plan_graph(..., kernels='cmsis-nn') head equals the probe's head for every model (the
    x86 build has no ARM_MATH_DSP, so it is planned with dsp=False), and the tail estimate of
    the same build (RecordingMicroInterpreter, as the probe) equals the probe's tail."""
    tflm_dir, bp = _probe()
    try:
        exe = bp.build_probe(tflm_dir, "cmsis_nn", target)
    except bp.ProbeUnavailable as exc:  # a failing build is a failure, not a skip
        pytest.skip(f"no {target} CMSIS-NN probe: {exc}")
    for path in _probe_models(tmp_path):
        real = bp.run_probe(exe, path, target)
        g = build_graph(load_model(path))
        if target == "host":
            with pytest.MonkeyPatch.context() as mp:  # the x86 build has no ARM_MATH_DSP
                mp.setattr(cmsis_nn, "scratch_requests", _no_dsp)
                plan = plan_graph(g, "cmsis-nn", BuildProfile("host64-make-recording", 8))
        else:
            plan = plan_graph(g, "cmsis-nn", BuildProfile("cortex-m-recording", 4))
        print(
            f"{path.name} cmsis_nn {target}: head {plan.head} (TFLM {real['head']}), "
            f"tail {plan.tail.total} (TFLM {real['tail']})"
        )
        assert plan.head == real["head"], (
            f"{path.name} ({target}): head {plan.head} vs {real['head']}"
        )
        assert plan.tail.total == real["tail"], (
            f"{path.name} ({target}): tail {plan.tail.total} vs {real['tail']}"
        )


def _no_dsp(graph, op, pointer_bytes):
    return cmsis_nn.scratch_requests_for(graph, op, pointer_bytes, dsp=False)


@pytest.mark.parametrize("target", ["host", "cortex_m7"])
def test_reference_tail_matches_real_builds(target: str, tmp_path: Path) -> None:
    """Makefile builds of the reference kernels: head and RecordingMicroInterpreter tail exact."""
    tflm_dir, bp = _probe()
    try:
        exe = bp.build_probe(tflm_dir, "reference", target)
    except bp.ProbeUnavailable as exc:  # a failing build is a failure, not a skip
        pytest.skip(f"no {target} reference probe: {exc}")
    name, pb = ("host64-make-recording", 8) if target == "host" else ("cortex-m-recording", 4)
    for path in _probe_models(tmp_path):
        real = bp.run_probe(exe, path, target)
        plan = plan_graph(build_graph(load_model(path)), "reference", BuildProfile(name, pb))
        assert plan.head == real["head"]
        assert plan.tail.total == real["tail"], (
            f"{path.name} ({target}): tail {plan.tail.total} vs {real['tail']}"
        )
