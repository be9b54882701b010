"""Small random models built straight into the flatbuffer schema, without TensorFlow.

Tests, benchmarks and bug reports need many valid models of the shape TinySeg
cares about (encoder/decoder graphs with long skip connections); building them
here keeps TensorFlow out of everything but the example-model script.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from tinyseg_plugin.ir.schema import BUILTIN_CODES, TYPE_CODES, fb

SAME, VALID = fb.Padding.SAME, fb.Padding.VALID


@dataclass
class ModelBuilder:
    """Builds one subgraph; int8 models share one activation scale so every operator is valid."""

    dtype: str = "INT8"  # "INT8" or "FLOAT32"
    seed: int = 0
    act_scale: float = 0.05
    act_zero_point: int = -3
    bias_type: str = "INT64"  # int16 models: a convolution's bias type
    rng: np.random.Generator = field(init=False)
    tensors: list = field(default_factory=list)
    buffers: list = field(default_factory=lambda: [fb.BufferT()])
    operators: list = field(default_factory=list)
    opcodes: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)
    shapes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    # -- tensors
    def _tensor(
        self,
        shape,
        dtype: str,
        name: str,
        data: np.ndarray | None = None,
        scales=None,
        zps=None,
        qdim=0,
    ) -> int:
        t = fb.TensorT()
        t.shape = list(shape)
        t.type = TYPE_CODES[dtype]
        t.name = name.encode()
        if data is not None:
            b = fb.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8).copy()
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        else:
            t.buffer = 0
        if scales is not None:
            q = fb.QuantizationParametersT()
            q.scale = [float(s) for s in scales]
            q.zeroPoint = [int(z) for z in zps]
            q.quantizedDimension = qdim
            t.quantization = q
        self.tensors.append(t)
        idx = len(self.tensors) - 1
        self.shapes[idx] = tuple(shape)
        return idx

    def activation(self, shape, name: str) -> int:
        if self.dtype == "INT16":  # 16x8: symmetric int16 activations (zero point 0, as TFLM needs)
            return self._tensor(shape, "INT16", name, scales=[self.act_scale / 256], zps=[0])
        if self.dtype == "INT8":
            return self._tensor(
                shape, "INT8", name, scales=[self.act_scale], zps=[self.act_zero_point]
            )
        return self._tensor(shape, "FLOAT32", name)

    def input(self, shape) -> int:
        t = self.activation(shape, f"input{len(self.inputs)}")
        self.inputs.append(t)
        return t

    def _weights(self, shape, qdim: int, name: str) -> int:
        channels = shape[qdim]
        if self.dtype in ("INT8", "INT16"):
            w = self.rng.integers(-127, 128, size=shape, dtype=np.int8)
            scales = self.rng.uniform(0.002, 0.01, size=channels)
            return self._tensor(shape, "INT8", name, w, scales, [0] * channels, qdim)
        w = self.rng.normal(0, 0.3, size=shape).astype(np.float32)
        return self._tensor(shape, "FLOAT32", name, w)

    def _bias(self, channels: int, in_t: int, w_t: int, name: str) -> int:
        if self.dtype == "INT16":  # 16x8: int64 bias (bias_type "INT32" for a CONV_2D's int32 one)
            ws = self.tensors[w_t].quantization.scale
            scales = [self.act_scale / 256 * s for s in ws]
            kind = self.bias_type
            b = self.rng.integers(-200000, 200000, size=channels).astype(kind.lower())
            return self._tensor([channels], kind, name, b, scales, [0] * channels)
        if self.dtype == "INT8":
            ws = self.tensors[w_t].quantization.scale
            scales = [self.act_scale * s for s in ws]
            b = self.rng.integers(-2000, 2000, size=channels, dtype=np.int32)
            return self._tensor([channels], "INT32", name, b, scales, [0] * channels)
        return self._tensor(
            [channels], "FLOAT32", name, self.rng.normal(0, 0.1, size=channels).astype(np.float32)
        )

    # -- operators
    def _op(self, name: str, inputs, outputs, options_type=0, options=None) -> None:
        code = BUILTIN_CODES[name]
        if name not in self.opcodes:
            oc = fb.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = 1
            self.opcodes[name] = (len(self.opcodes), oc)
        op = fb.OperatorT()
        op.opcodeIndex = self.opcodes[name][0]
        op.inputs = list(inputs)
        op.outputs = list(outputs)
        op.builtinOptionsType = options_type
        op.builtinOptions = options
        self.operators.append(op)

    @staticmethod
    def _out_dim(size: int, k: int, stride: int, padding: int, dilation: int = 1) -> int:
        eff = (k - 1) * dilation + 1
        return math.ceil(size / stride) if padding == SAME else (size - eff) // stride + 1

    def conv(
        self,
        x: int,
        out_ch: int,
        k: int = 3,
        stride: int = 1,
        padding: int = SAME,
        relu: bool = True,
        dilation: int = 1,
    ) -> int:
        n, h, w, c = self.shapes[x]
        wt = self._weights([out_ch, k, k, c], 0, f"conv{len(self.operators)}/w")
        bt = self._bias(out_ch, x, wt, f"conv{len(self.operators)}/b")
        oh, ow = (
            self._out_dim(h, k, stride, padding, dilation),
            self._out_dim(w, k, stride, padding, dilation),
        )
        y = self.activation([n, oh, ow, out_ch], f"conv{len(self.operators)}")
        o = fb.Conv2DOptionsT()
        o.padding, o.strideH, o.strideW = padding, stride, stride
        o.dilationHFactor = o.dilationWFactor = dilation
        o.fusedActivationFunction = fb.ActivationFunctionType.RELU if relu else 0
        self._op("CONV_2D", [x, wt, bt], [y], fb.BuiltinOptions.Conv2DOptions, o)
        return y

    def depthwise(
        self, x: int, k: int = 3, stride: int = 1, padding: int = SAME, multiplier: int = 1
    ) -> int:
        n, h, w, c = self.shapes[x]
        wt = self._weights([1, k, k, c * multiplier], 3, f"dw{len(self.operators)}/w")
        bt = self._bias(c * multiplier, x, wt, f"dw{len(self.operators)}/b")
        y = self.activation(
            [
                n,
                self._out_dim(h, k, stride, padding),
                self._out_dim(w, k, stride, padding),
                c * multiplier,
            ],
            f"dw{len(self.operators)}",
        )
        o = fb.DepthwiseConv2DOptionsT()
        o.padding, o.strideH, o.strideW, o.depthMultiplier = padding, stride, stride, multiplier
        o.dilationHFactor = o.dilationWFactor = 1
        self._op("DEPTHWISE_CONV_2D", [x, wt, bt], [y], fb.BuiltinOptions.DepthwiseConv2DOptions, o)
        return y

    def pool(
        self, x: int, kind: str = "MAX_POOL_2D", k: int = 2, stride: int = 2, padding: int = VALID
    ) -> int:
        n, h, w, c = self.shapes[x]
        y = self.activation(
            [n, self._out_dim(h, k, stride, padding), self._out_dim(w, k, stride, padding), c],
            f"pool{len(self.operators)}",
        )
        o = fb.Pool2DOptionsT()
        o.padding, o.strideH, o.strideW, o.filterHeight, o.filterWidth = (
            padding,
            stride,
            stride,
            k,
            k,
        )
        self._op(kind, [x], [y], fb.BuiltinOptions.Pool2DOptions, o)
        return y

    def transpose_conv(
        self, x: int, out_ch: int, k: int = 2, stride: int = 2, bias: bool = True
    ) -> int:
        """A TRANSPOSE_CONV, SAME; without ``bias`` three inputs (as TensorFlow's converter writes
        an int16 one whose bias is zero)."""
        n, h, w, c = self.shapes[x]
        oshape = [n, h * stride, w * stride, out_ch]
        shape_t = self._tensor(
            [4], "INT32", f"tconv{len(self.operators)}/shape", np.array(oshape, dtype=np.int32)
        )
        wt = self._weights([out_ch, k, k, c], 0, f"tconv{len(self.operators)}/w")
        bt = [self._bias(out_ch, x, wt, f"tconv{len(self.operators)}/b")] if bias else []
        y = self.activation(oshape, f"tconv{len(self.operators)}")
        o = fb.TransposeConvOptionsT()
        o.padding, o.strideH, o.strideW = SAME, stride, stride
        self._op(
            "TRANSPOSE_CONV", [shape_t, wt, x, *bt], [y], fb.BuiltinOptions.TransposeConvOptions, o
        )
        return y

    def concat(self, xs: list[int], axis: int = 3) -> int:
        shape = list(self.shapes[xs[0]])
        shape[axis] = sum(self.shapes[x][axis] for x in xs)
        y = self.activation(shape, f"concat{len(self.operators)}")
        o = fb.ConcatenationOptionsT()
        o.axis = axis
        self._op("CONCATENATION", xs, [y], fb.BuiltinOptions.ConcatenationOptions, o)
        return y

    def relu(
        self, x: int, op: str = "RELU", scale: float | None = None, zero_point: int | None = None
    ) -> int:
        """A standalone RELU or RELU6 (int8: output quantization ``scale``/``zero_point``, by default
        the builder's; RELU requantizes, RELU6 keeps the input's as TFLM's int8 kernel assumes)."""
        name = f"{op.lower()}{len(self.operators)}"
        if self.dtype == "INT8" and (scale is not None or zero_point is not None):
            y = self._tensor(
                list(self.shapes[x]),
                "INT8",
                name,
                scales=[scale or self.act_scale],
                zps=[self.act_zero_point if zero_point is None else zero_point],
            )
        else:
            y = self.activation(list(self.shapes[x]), name)
        self._op(op, [x], [y])
        return y

    def pad(self, x: int, paddings) -> int:
        """A PAD by constant int32 ``paddings`` ([[before, after]] per NHWC axis)."""
        pads = np.array(paddings, dtype=np.int32).reshape(4, 2)
        p_t = self._tensor([4, 2], "INT32", f"pad{len(self.operators)}/paddings", pads)
        y = self.activation(
            [d + int(a) + int(b) for d, (a, b) in zip(self.shapes[x], pads)],
            f"pad{len(self.operators)}",
        )
        self._op("PAD", [x, p_t], [y], fb.BuiltinOptions.PadOptions, fb.PadOptionsT())
        return y

    def constant(self, shape) -> int:
        """An int8 constant activation operand (random, the builder's quantization): a per-channel
        vector an elementwise operator broadcasts over the rows."""
        data = self.rng.integers(-128, 128, size=shape, dtype=np.int8)
        return self._tensor(
            list(shape),
            "INT8",
            f"const{len(self.tensors)}",
            data,
            [self.act_scale],
            [self.act_zero_point],
        )

    def constant_like(self, shape) -> int:
        """A random constant operand of the builder's activation type and quantization (int8,
        int16 with zero point 0, or float32): a grid or a per-channel vector an elementwise
        operator broadcasts."""
        n = len(self.tensors)
        if self.dtype == "FLOAT32":
            data = self.rng.normal(0, 1, size=shape).astype(np.float32)
            return self._tensor(list(shape), "FLOAT32", f"const{n}", data)
        if self.dtype == "INT16":
            data = self.rng.integers(-30000, 30000, size=shape).astype(np.int16)
            return self._tensor(
                list(shape), "INT16", f"const{n}", data, [self.act_scale / 256], [0]
            )
        return self.constant(shape)

    def unary(
        self,
        x: int,
        op: str,
        scale: float | None = None,
        zero_point: int | None = None,
        alpha: float | None = None,
    ) -> int:
        """An int8 elementwise activation operator (TANH, HARD_SWISH, ELU, LEAKY_RELU with ``alpha``) whose
        output has quantization ``scale``/``zero_point`` (by default the builder's)."""
        y = self._tensor(
            list(self.shapes[x]),
            "INT8",
            f"{op.lower()}{len(self.operators)}",
            scales=[self.act_scale if scale is None else scale],
            zps=[self.act_zero_point if zero_point is None else zero_point],
        )
        if op == "LEAKY_RELU":
            o = fb.LeakyReluOptionsT()
            o.alpha = float(np.float32(alpha))
            self._op(op, [x], [y], fb.BuiltinOptions.LeakyReluOptions, o)
        else:
            self._op(op, [x], [y])
        return y

    def to_float(self, x: int) -> int:
        """DEQUANTIZE of an int8 activation to a FLOAT32 one (a float model output)."""
        y = self._tensor(list(self.shapes[x]), "FLOAT32", f"dequant{len(self.operators)}")
        self._op("DEQUANTIZE", [x], [y])
        return y

    def padv2(self, x: int, paddings, value: float) -> int:
        """A PADV2 by constant int32 ``paddings`` with the constant scalar pad ``value`` (int8:
        output and value keep the input's quantization, PADV2 requantizes nothing; float32: a
        float32 scalar; int16: an int16 scalar without quantization, as TFLM reads it)."""
        name = f"padv2_{len(self.operators)}"
        pads = np.array(paddings, dtype=np.int32).reshape(4, 2)
        p_t = self._tensor([4, 2], "INT32", f"{name}/paddings", pads)
        shape = [d + int(a) + int(b) for d, (a, b) in zip(self.shapes[x], pads)]
        if self.dtype == "FLOAT32":
            v_t = self._tensor([], "FLOAT32", f"{name}/value", np.array(value, dtype=np.float32))
            y = self._tensor(shape, "FLOAT32", name)
            self._op(
                "PADV2", [x, p_t, v_t], [y], fb.BuiltinOptions.PadV2Options, fb.PadV2OptionsT()
            )
            return y
        q = self.tensors[x].quantization
        if self.dtype == "INT16":  # an int16 scalar TFLM copies as is (zero point 0)
            v_t = self._tensor([], "INT16", f"{name}/value", np.array(value, dtype=np.int16))
            y = self.activation(shape, name)
            self._op(
                "PADV2", [x, p_t, v_t], [y], fb.BuiltinOptions.PadV2Options, fb.PadV2OptionsT()
            )
            return y
        v_t = self._tensor(
            [],
            "INT8",
            f"{name}/value",
            np.array(value, dtype=np.int8),
            list(q.scale),
            list(q.zeroPoint),
        )
        y = self._tensor(shape, "INT8", name, scales=list(q.scale), zps=list(q.zeroPoint))
        self._op("PADV2", [x, p_t, v_t], [y], fb.BuiltinOptions.PadV2Options, fb.PadV2OptionsT())
        return y

    def resize_bilinear(
        self, x: int, size, align_corners: bool = False, half_pixel_centers: bool = True
    ) -> int:
        """A RESIZE_BILINEAR to ``size`` (height, width), its output in the input's quantization
        (as TFLM's int8 kernel assumes)."""
        n, _, _, c = self.shapes[x]
        name = f"resize_bilinear{len(self.operators)}"
        size_t = self._tensor([2], "INT32", f"{name}/size", np.array(size, dtype=np.int32))
        y = self.activation([n, size[0], size[1], c], name)
        o = fb.ResizeBilinearOptionsT()
        o.alignCorners, o.halfPixelCenters = align_corners, half_pixel_centers
        self._op("RESIZE_BILINEAR", [x, size_t], [y], fb.BuiltinOptions.ResizeBilinearOptions, o)
        return y

    def add(self, a: int, b: int, op: str = "ADD") -> int:
        """An elementwise ADD (or SUB or MUL) of two tensors of one shape."""
        y = self.activation(list(self.shapes[a]), f"{op.lower()}{len(self.operators)}")
        kind = op.title()  # Add, Sub, Mul
        self._op(
            op,
            [a, b],
            [y],
            getattr(fb.BuiltinOptions, f"{kind}Options"),
            getattr(fb, f"{kind}OptionsT")(),
        )
        return y

    def mean_hw(
        self,
        x: int,
        scale: float | None = None,
        zero_point: int | None = None,
        keep_dims: bool = True,
    ) -> int:
        """MEAN over height and width (a global average pool as converters write it): a
        1 x 1 x 1 x C output with ``keep_dims``, 1 x C without (Keras' GlobalAveragePooling2D());
        int8 or int16 with ``scale``/``zero_point``: another quantization than the builder's
        (TFLM then requantizes the mean; int16 keeps zero point 0)."""
        name = f"mean{len(self.operators)}"
        axis = self._tensor([2], "INT32", f"{name}/axis", np.array([1, 2], dtype=np.int32))
        shape = [1, 1, 1, self.shapes[x][3]] if keep_dims else [1, self.shapes[x][3]]
        if scale is not None and self.dtype in ("INT8", "INT16"):
            y = self._tensor(shape, self.dtype, name, scales=[scale], zps=[zero_point or 0])
        else:
            y = self.activation(shape, name)
        o = fb.ReducerOptionsT()
        o.keepDims = keep_dims
        self._op("MEAN", [x, axis], [y], fb.BuiltinOptions.ReducerOptions, o)
        return y

    def reshape(self, x: int, shape) -> int:
        """RESHAPE with its shape as a constant operand (as converters write it)."""
        y = self.activation(list(shape), f"reshape{len(self.operators)}")
        st = self._tensor(
            [len(shape)], "INT32", f"reshape{len(self.operators)}/shape", np.array(shape, np.int32)
        )
        o = fb.ReshapeOptionsT()
        o.newShape = [int(d) for d in shape]
        self._op("RESHAPE", [x, st], [y], fb.BuiltinOptions.ReshapeOptions, o)
        return y

    def transpose(self, x: int, perm) -> int:
        shape = [self.shapes[x][p] for p in perm]
        y = self.activation(shape, f"transpose{len(self.operators)}")
        pt = self._tensor(
            [len(perm)], "INT32", f"transpose{len(self.operators)}/perm", np.array(perm, np.int32)
        )
        self._op(
            "TRANSPOSE", [x, pt], [y], fb.BuiltinOptions.TransposeOptions, fb.TransposeOptionsT()
        )
        return y

    def dequantize(self, shape, source: str = "FLOAT16") -> int:
        """DEQUANTIZE of constant weights (FLOAT16, as float16-quantized converters write them,
        or INT8) to a FLOAT32 activation."""
        name = f"dequant{len(self.operators)}"
        if source == "FLOAT16":
            w = self._tensor(
                shape,
                "FLOAT16",
                f"{name}/w",
                self.rng.normal(0, 0.3, size=shape).astype(np.float16),
            )
        else:
            w = self._tensor(
                shape,
                "INT8",
                f"{name}/w",
                self.rng.integers(-127, 128, size=shape, dtype=np.int8),
                [0.01],
                [0],
            )
        y = self._tensor(shape, "FLOAT32", name)
        self._op("DEQUANTIZE", [w], [y])
        return y

    def hybrid_fully_connected(self, x: int, units: int) -> int:
        """FULLY_CONNECTED with float activations and int8 weights (a dynamic-range "hybrid" operator)."""
        shape = self.shapes[x]
        depth = shape[-1]
        w = self._tensor(
            [units, depth],
            "INT8",
            f"fc{len(self.operators)}/w",
            self.rng.integers(-127, 128, size=(units, depth), dtype=np.int8),
            [0.01],
            [0],
        )
        y = self._tensor(list(shape[:-1]) + [units], "FLOAT32", f"fc{len(self.operators)}")
        o = fb.FullyConnectedOptionsT()
        o.keepNumDims = True
        self._op("FULLY_CONNECTED", [x, w, -1], [y], fb.BuiltinOptions.FullyConnectedOptions, o)
        return y

    def hybrid_conv(self, x: int, out_ch: int, k: int = 1) -> int:
        """CONV_2D with float activations and per-channel int8 weights (hybrid)."""
        n, h, w, c = self.shapes[x]
        wt = self._tensor(
            [out_ch, k, k, c],
            "INT8",
            f"hconv{len(self.operators)}/w",
            self.rng.integers(-127, 128, size=(out_ch, k, k, c), dtype=np.int8),
            [0.01] * out_ch,
            [0] * out_ch,
            0,
        )
        y = self._tensor([n, h, w, out_ch], "FLOAT32", f"hconv{len(self.operators)}")
        o = fb.Conv2DOptionsT()
        o.padding, o.strideH, o.strideW, o.dilationHFactor, o.dilationWFactor = SAME, 1, 1, 1, 1
        self._op("CONV_2D", [x, wt, -1], [y], fb.BuiltinOptions.Conv2DOptions, o)
        return y

    def unreferenced(self, shape=(1, 4, 4, 4)) -> int:
        """A tensor no operator reads or writes and no graph input or output names (converters leave these)."""
        return self.activation(list(shape), f"unreferenced{len(self.tensors)}")

    def build(self, outputs: list[int]) -> "fb.ModelT":
        sg = fb.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.operators
        sg.inputs, sg.outputs = list(self.inputs), list(outputs)
        sg.name = b"main"
        m = fb.ModelT()
        m.version = 3
        m.operatorCodes = [oc for _, oc in sorted(self.opcodes.values(), key=lambda v: v[0])]
        m.subgraphs = [sg]
        m.buffers = self.buffers
        m.description = b"tinyseg synth"
        return m


def random_unet(
    seed: int, dtype: str | None = None, max_depth: int = 3, up_kernels: tuple[int, ...] = (2,)
) -> "fb.ModelT":
    """A random encoder/decoder with long skip connections, pooling, depthwise and residual adds;
    each up-sampling TRANSPOSE_CONV (stride 2, SAME) of a kernel drawn from ``up_kernels`` (one
    kernel: no draw, so the default's models stay as they were)."""
    rng = np.random.default_rng(seed)
    dtype = dtype or ("INT8" if rng.random() < 0.7 else "FLOAT32")
    b = ModelBuilder(dtype=dtype, seed=seed)
    depth = int(rng.integers(1, max_depth + 1))
    size = int(rng.choice([8, 12, 16, 24])) * (2 ** max(depth - 2, 0))
    ch = int(rng.choice([2, 4, 8]))
    x = b.input(
        [1, size, size * int(rng.choice([1, 2])) if False else size, int(rng.choice([1, 3, 4]))]
    )
    skips = []
    for d in range(depth):
        x = b.conv(x, ch * 2**d, k=int(rng.choice([1, 3])))
        if rng.random() < 0.4:
            x = b.add(x, b.depthwise(x)) if rng.random() < 0.5 else b.depthwise(x)
        if rng.random() < 0.3:
            x = b.conv(x, ch * 2**d, k=3, relu=bool(rng.random() < 0.5))
        skips.append(x)
        kind = "MAX_POOL_2D" if rng.random() < 0.6 else "AVERAGE_POOL_2D"
        x = b.pool(x, kind) if rng.random() < 0.7 else b.conv(x, ch * 2**d, k=3, stride=2)
    x = b.conv(x, ch * 2**depth, k=int(rng.choice([1, 3])))
    for d in reversed(range(depth)):
        k = up_kernels[0] if len(up_kernels) == 1 else int(rng.choice(up_kernels))
        x = b.transpose_conv(x, max(ch * 2**d // int(rng.choice([1, 2])), 1), k=k)
        skip = skips[d]
        if b.shapes[x][1:3] != b.shapes[skip][1:3]:
            x = b.conv(
                x, b.shapes[x][3], k=1
            )  # never happens for even sizes; keeps the graph valid
        parts = [skip, x] if rng.random() < 0.7 else [x, skip]
        x = b.concat(parts, axis=3)
        if rng.random() < 0.3:  # V-Net's decoder residual: ADD(concatenation, conv(concatenation))
            x = b.add(x, b.conv(x, b.shapes[x][3], k=3))
        x = b.conv(x, ch * 2**d, k=3)
        if rng.random() < 0.3:
            x = b.conv(x, ch * 2**d, k=3)
    out = b.conv(x, int(rng.choice([1, 2])), k=1, relu=False)
    return b.build([out])


def chain(n_ops: int, size: int = 16, channels: int = 8, seed: int = 0) -> "fb.ModelT":
    """A long model (for planner benchmarks): n_ops convolutions with a skip every few layers."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, size, size, channels])
    skips: list[int] = []
    for i in range(n_ops):
        if skips and i % 7 == 6:
            x = b.add(x, skips.pop(0))
        else:
            x = b.conv(x, channels, k=1)
        if i % 5 == 0:
            skips.append(x)
    return b.build([x])


def tiny_unet_like(seed: int = 0, dtype: str = "INT8") -> "fb.ModelT":
    """The Tiny U-Net's operator graph (80x120x3 in, skips at 8/16/32 channels) with random weights:
    the same tensors and lifetimes as the converted Keras model, for tests that must not need TensorFlow."""
    b = ModelBuilder(dtype=dtype, seed=seed)
    x = b.input([1, 80, 120, 3])

    def double(t: int, c: int) -> int:
        return b.conv(b.conv(t, c), c)

    x1 = double(x, 8)
    x2 = double(b.pool(x1), 16)
    x3 = double(b.pool(x2), 32)
    x4 = double(b.pool(x3), 64)
    y = x4
    for skip, c in ((x3, 32), (x2, 16), (x1, 8)):
        up = b.transpose_conv(y, c // 2)
        y = double(b.concat([skip, up]), c)
    return b.build([b.conv(y, 1, k=1, relu=False)])


def activations_unet(seed: int = 0, size: int = 16) -> "fb.ModelT":
    """A small int8 U-Net with standalone activation operators: a requantizing RELU (to another
    scale and zero point), RELU6 and a RELU of the builder's quantization, in front of
    convolutions, a pool, a transposed convolution and a skip concatenation."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, size, size, 3])
    a = b.relu(b.conv(x, 8, relu=False), "RELU", scale=0.031, zero_point=-128)
    a = b.relu(b.conv(a, 8, relu=False), "RELU6")
    y = b.relu(b.conv(b.pool(a), 16, relu=False), "RELU")
    y = b.concat([a, b.transpose_conv(y, 8)])
    y = b.relu(b.conv(y, 8, relu=False), "RELU6")
    return b.build([b.conv(y, 1, k=1, relu=False)])


def padded_unet(seed: int = 0, size: int = 16) -> "fb.ModelT":
    """A small int8 U-Net whose convolutions are VALID behind explicit PADs (symmetric 1-pixel,
    asymmetric, height-only), with standalone RELU and RELU6 between them."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, size, size, 3])
    a = b.conv(b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), 8, padding=VALID, relu=False)
    a = b.relu(a, "RELU", scale=0.031, zero_point=-128)
    a = b.relu(
        b.conv(b.pad(a, [[0, 0], [2, 0], [0, 2], [0, 0]]), 8, padding=VALID, relu=False), "RELU6"
    )
    y = b.conv(b.pad(b.pool(a), [[0, 0], [1, 1], [1, 1], [0, 0]]), 16, padding=VALID, relu=False)
    y = b.relu(y, "RELU")
    y = b.concat([a, b.transpose_conv(y, 8)])
    y = b.conv(b.pad(y, [[0, 0], [1, 1], [0, 0], [0, 0]]), 8, k=3, padding=VALID, relu=False)
    y = b.relu(
        b.conv(b.pad(y, [[0, 0], [0, 0], [1, 1], [0, 0]]), 8, padding=VALID, relu=False), "RELU6"
    )
    return b.build([b.conv(y, 1, k=1, relu=False)])


def more_stages_unet(seed: int = 0, size: int = 16) -> "fb.ModelT":
    """A small int8 U-Net with the row-local operators StreamChain computes beyond those of
    tiny_unet_like: SUB of two activations of different quantization, SUB broadcasting a one-channel
    activation across channels, SUB of a per-channel constant (as the second operand, and as the
    first with a fused RELU); LEAKY_RELU and HARD_SWISH requantizing the bottleneck, ELU (its
    table: every input value of a requantizing ELU, exp(x) - 1 down to -6.25, and clamping above)
    then TANH (output 1/128, as converters quantize it) in the decoder, PADV2 (symmetric and asymmetric, pad values
    other than the zero point) in front of VALID convolutions; DEQUANTIZE to float32 model outputs (the
    bottleneck's and the last convolution's)."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, size, size, 3])
    r = b.relu(b.conv(x, 8, relu=False), "RELU", scale=0.031, zero_point=-128)
    a = b.add(b.conv(x, 8, relu=False), r, "SUB")
    a = b.add(a, b.conv(a, 1, k=1, relu=False), "SUB")
    a = b.add(a, b.constant([8]), "SUB")
    c = b.constant([1, 1, 1, 8])
    y = b.activation(list(b.shapes[a]), f"sub{len(b.operators)}")
    o = fb.SubOptionsT()
    o.fusedActivationFunction = fb.ActivationFunctionType.RELU
    b._op("SUB", [c, a], [y], fb.BuiltinOptions.SubOptions, o)
    a = y
    bottleneck = b.unary(
        b.conv(b.pool(a), 16, relu=False), "LEAKY_RELU", scale=0.04, zero_point=-10, alpha=0.2
    )
    bottleneck = b.unary(bottleneck, "HARD_SWISH")
    y = b.concat([a, b.transpose_conv(bottleneck, 8)])
    y = b.conv(b.padv2(y, [[0, 0], [1, 1], [1, 1], [0, 0]], 7), 8, padding=VALID, relu=False)
    y = b.unary(y, "ELU", scale=0.03, zero_point=-90)
    y = b.unary(y, "TANH", scale=1 / 128, zero_point=0)
    y = b.conv(b.padv2(y, [[0, 0], [2, 0], [0, 2], [0, 0]], -100), 8, padding=VALID, relu=False)
    return b.build([b.to_float(b.conv(y, 1, k=1, relu=False)), b.to_float(bottleneck)])


def grid_head(seed: int = 0, dtype: str = "INT8", h: int = 256) -> "fb.ModelT":
    """A detection head's decoding as YOLOv5's TFLite export writes it, at a small size: rows are
    grid cells (h), width the anchors (3), channels the coordinates (2); an ADD of the
    grid (a constant of every row, 1 x h x 1 x 2, broadcast over the anchors), a MUL of the
    anchors (a constant of one row, 1 x 1 x 3 x 2), between 1x1 convolutions so that one chain
    holds them all."""
    b = ModelBuilder(dtype=dtype, seed=seed)
    x = b.conv(b.input([1, h, 3, 4]), 2, k=1)
    x = b.add(x, b.constant_like([1, h, 1, 2]))
    x = b.add(x, b.constant_like([1, 1, 3, 2]), "MUL")
    x = b.add(x, b.constant_like([h, 1, 2]), "SUB")  # a grid of rank 3
    return b.build([b.conv(x, 2, k=1, relu=False)])


def vnet_like(seed: int = 0, dtype: str = "INT8", size: int = 32) -> "fb.ModelT":
    """V-Net 2D's shape at a small scale: residual blocks, and decoder blocks whose residual ADD reads the
    skip concatenation, ADD(CONCATENATION(up, skip), CONV_2D(CONCATENATION(up, skip))): the pattern that
    keeps three full-resolution tensors live until it is split."""
    b = ModelBuilder(dtype=dtype, seed=seed)
    x = b.input([1, size, size, 1])
    x = b.add(b.concat([x] * 4), b.conv(x, 4))
    skips = []
    for c in (4, 8):
        skips.append(x)
        x = b.conv(x, 2 * c, k=2, stride=2, padding=VALID)
        x = b.add(x, b.conv(b.conv(x, 2 * c), 2 * c))
    for c, skip in zip((8, 4), reversed(skips)):
        up = b.transpose_conv(x, c)
        cat = b.concat([up, skip])
        x = b.add(cat, b.conv(cat, 2 * c))
    return b.build([b.conv(x, 2, k=1, relu=False)])


def wide_branches(
    seed: int = 0, width: int = 110, kind: str = "conv", dtype: str = "INT8"
) -> "fb.ModelT":
    """A wide graph: ``width`` independent operators feeding a chain of ADDs (the shape of detection heads
    and of converters' weight DEQUANTIZEs). kind "conv": 1x1 convolutions of the input; "dequantize":
    DEQUANTIZE of constant weights (FLOAT16, which TFLM refuses; "dequantize-int8" runs), added to the input."""
    b = ModelBuilder(dtype="FLOAT32" if kind.startswith("dequantize") else dtype, seed=seed)
    x = b.input([1, 4, 4, 4])
    if kind == "conv":
        branches = [b.conv(x, 4, k=1, relu=False) for _ in range(width)]
    else:
        source = "INT8" if kind == "dequantize-int8" else "FLOAT16"
        branches = [b.dequantize([1, 4, 4, 4], source) for _ in range(width)]
    acc = x
    for t in branches:
        acc = b.add(acc, t)
    return b.build([acc])


def random_real(seed: int, refused: str | None = None) -> "fb.ModelT":
    """A random model with what real converted models carry beyond the U-Net shape: several graph inputs
    and outputs, a graph output that is also read inside the graph, unreferenced tensors, RESHAPE and
    TRANSPOSE next to concatenations, concatenation along height and width, and (rarely) hybrid operators
    or float16 weights behind DEQUANTIZE, which TFLM refuses (``refused``: "hybrid_fc", "hybrid_conv" or
    "dequantize" forces one)."""
    rng = np.random.default_rng(seed)
    if rng.random() < 0.15 and refused is None:
        refused = str(rng.choice(["hybrid_fc", "hybrid_conv", "dequantize"]))
    dtype = "FLOAT32" if refused or rng.random() < 0.3 else "INT8"
    b = ModelBuilder(dtype=dtype, seed=seed)
    size = int(rng.choice([8, 12, 16]))
    ch = int(rng.choice([2, 4]))
    n_inputs = int(rng.integers(1, 4))
    xs = [b.input([1, size, size, ch]) for _ in range(n_inputs)]
    if rng.random() < 0.5:
        b.unreferenced()
    x = b.concat(xs, axis=3) if n_inputs > 1 else xs[0]
    x = b.conv(x, ch * 2)
    outputs: list[int] = []
    skip = x
    if rng.random() < 0.5:
        outputs.append(skip)  # a graph output that later operators read too
    x = b.pool(x)
    x = b.conv(x, ch * 2)
    if rng.random() < 0.5:
        b.unreferenced((1, size, size, 1))
    # A concatenation along height or width, with RESHAPE/TRANSPOSE around it.
    axis = int(rng.choice([1, 2, 3]))
    other = b.conv(x, ch * 2, k=1)
    if rng.random() < 0.5:
        other = b.transpose(b.transpose(other, [0, 2, 1, 3]), [0, 2, 1, 3])
    cat = b.concat([x, other], axis=axis)
    shape = b.shapes[cat]
    if rng.random() < 0.5:
        flat = b.reshape(cat, [1, shape[1] * shape[2], shape[3]])
        cat = b.reshape(flat, list(shape))
    y = b.conv(cat, ch * 2, k=3)
    if axis != 3:
        y = b.pool(y, "MAX_POOL_2D", k=1, stride=1)
        y = b.conv(y, ch * 2, k=1)
        # back to h x h for the decoder: pool away the doubled axis
        kh, kw = (2, 1) if axis == 1 else (1, 2)
        n_, hh, ww, cc = b.shapes[y]
        out = b.activation([n_, hh // kh, ww // kw, cc], f"pool{len(b.operators)}")
        o = fb.Pool2DOptionsT()
        o.padding, o.strideH, o.strideW, o.filterHeight, o.filterWidth = VALID, kh, kw, kh, kw
        b._op("MAX_POOL_2D", [y], [out], fb.BuiltinOptions.Pool2DOptions, o)
        y = out
    up = b.transpose_conv(y, ch * 2)
    y = b.conv(b.concat([skip, up], axis=3), ch, k=3)
    outputs.append(b.conv(y, 1, k=1, relu=False))
    if rng.random() < 0.5:
        outputs.append(b.pool(y))  # a second head
    if refused:
        if refused == "hybrid_fc":
            outputs.append(b.hybrid_fully_connected(y, 3))
        elif refused == "hybrid_conv":
            outputs.append(b.hybrid_conv(y, 2))
        else:
            outputs.append(b.add(y, b.dequantize(list(b.shapes[y]))))
    rng.shuffle(outputs)
    return b.build(outputs)


def relu_chain(n_ops: int, size: int = 8, channels: int = 4, seed: int = 0) -> "fb.ModelT":
    """A 1x1 convolution followed by ``n_ops`` standalone RELUs: one long chain of row-local
    operators (the shape that streaming analysis must handle without deep recursion)."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.conv(b.input([1, size, size, channels]), channels, k=1, relu=False)
    for _ in range(n_ops):
        x = b.relu(x)
    return b.build([x])


def unused_inputs(n_inputs: int, size: int = 8, channels: int = 4, seed: int = 0) -> "fb.ModelT":
    """A two-convolution model with ``n_inputs`` further graph inputs that no operator reads
    (converters leave such inputs behind; each still takes arena space at scope 0)."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, size, size, channels])
    for _ in range(n_inputs):
        b.input([1, 2, 2, 1])
    return b.build([b.conv(b.conv(x, channels, k=1), channels, k=1)])


def bilinear_seg(
    seed: int = 0,
    size: tuple[int, int] = (24, 32),
    out: tuple[int, int] | None = None,
    align_corners: bool = False,
    half_pixel_centers: bool = True,
    classes: int = 12,
) -> "fb.ModelT":
    """A small int8 segmentation network shaped like MobileNetV3's LR-ASPP head: a stride-2
    encoder, the low-resolution features up-sampled by 2 with RESIZE_BILINEAR and concatenated
    with the stride-2 features, a 1x1 classifier, and a final RESIZE_BILINEAR to ``out`` (the
    input's size: a factor of 2; another size: a non-integer factor), the widest tensor of the
    model and so its peak."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x = b.input([1, size[0], size[1], 3])
    low = b.conv(x, 8, stride=2)
    deep = b.conv(b.conv(low, 16, stride=2), 16)
    h, w = b.shapes[low][1:3]
    up = b.resize_bilinear(deep, (h, w), align_corners, half_pixel_centers)
    y = b.conv(b.concat([low, up]), classes, k=1, relu=False)
    final = b.resize_bilinear(y, out or tuple(size), align_corners, half_pixel_centers)
    return b.build([final])


def deeplab_like(seed: int = 0, dtype: str = "FLOAT32") -> "fb.ModelT":
    """A small DeepLabV3 (MobileNetV2 encoder, ASPP head): a stride-2 stem, inverted residual
    blocks, a global-pool branch up-sampled with RESIZE_BILINEAR and concatenated with a 1x1
    branch, a classifier, and a final RESIZE_BILINEAR to the input's size."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(dtype=dtype, seed=seed)
    size = int(rng.choice([17, 25, 33, 41]))
    x = b.input([1, size, size, 3])
    x = b.conv(x, 8, stride=2)
    x = b.conv(b.depthwise(x), 4, k=1, relu=False)
    for blk in range(int(rng.integers(2, 5))):
        stride = 2 if blk == 0 else 1
        c = b.shapes[x][3]
        e = b.depthwise(b.conv(x, c * 6, k=1), stride=stride)
        y = b.conv(e, int(rng.choice([4, 8])) if stride == 2 else c, k=1, relu=False)
        x = b.add(x, y) if b.shapes[y] == b.shapes[x] else y
    h = b.shapes[x][1]
    pooled = b.conv(b.pool(x, "AVERAGE_POOL_2D", k=h, stride=h), 16, k=1)
    y = b.concat([b.resize_bilinear(pooled, (h, h)), b.conv(x, 16, k=1)])
    y = b.conv(b.conv(y, 16, k=1), int(rng.choice([6, 12, 21])), k=1, relu=False)
    return b.build([b.resize_bilinear(y, (size, size))])


def float_stages_unet(seed: int = 0, h: int = 24, w: int = 20) -> "fb.ModelT":
    """A float32 U-Net with every float32 stage the StreamChain kernel computes (CONV_2D,
    DEPTHWISE_CONV_2D, RELU6, PAD, MAX_POOL_2D, AVERAGE_POOL_2D, RESIZE_NEAREST_NEIGHBOR, MUL, ADD,
    RELU, LOGISTIC, TRANSPOSE_CONV, CONCATENATION), and a second output through QUANTIZE
    float32 -> int8, an int8 convolution and DEQUANTIZE into a float32 RELU."""
    b = ModelBuilder(dtype="FLOAT32", seed=seed)
    x = b.input([1, h, w, 3])
    a = b.conv(x, 8)
    r6 = b.relu(b.depthwise(a), "RELU6")
    c = b.conv(b.pad(r6, [[0, 0], [1, 1], [1, 1], [0, 0]]), 8, padding=VALID)
    av = b.pool(b.pool(c), "AVERAGE_POOL_2D", k=3, stride=1, padding=SAME)
    size = b._tensor([2], "INT32", "resize/size", np.array([h, w], dtype=np.int32))
    up = b.activation([1, h, w, 8], "resize")
    b._op(
        "RESIZE_NEAREST_NEIGHBOR",
        [av, size],
        [up],
        fb.BuiltinOptions.ResizeNearestNeighborOptions,
        fb.ResizeNearestNeighborOptionsT(),
    )
    s = b.add(b.add(up, a, op="MUL"), b.relu(a))
    lg = b.activation([1, h, w, 8], "logistic")
    b._op("LOGISTIC", [s], [lg])
    y = b.conv(b.concat([lg, b.transpose_conv(b.pool(lg), 8)]), 2, k=1, relu=False)
    q = b._tensor([1, h, w, 2], "INT8", "quantized", scales=[0.02], zps=[-5])
    b._op("QUANTIZE", [y], [q])
    b.dtype, b.act_scale, b.act_zero_point = "INT8", 0.02, -5  # the int8 convolution's tensors
    c8 = b.conv(q, 4)
    b.dtype = "FLOAT32"
    d = b._tensor([1, h, w, 4], "FLOAT32", "dequantized")
    b._op("DEQUANTIZE", [c8], [d])
    return b.build([y, b.relu(d)])


def float_geometry_chain(seed: int = 0) -> "fb.ModelT":
    """Float32 stages over odd sizes: a strided convolution, a 5x5 depthwise convolution with
    depth multiplier 2, a dilated VALID convolution, SAME pools of stride 2 and 1 and a channel
    concatenation of two of them (row windows with padding at both ends)."""
    b = ModelBuilder(dtype="FLOAT32", seed=seed)
    a = b.conv(b.input([1, 29, 23, 4]), 8, stride=2)
    d = b.depthwise(a, k=5, multiplier=2)
    e = b.conv(d, 8, dilation=2, padding=VALID)
    av = b.pool(e, "AVERAGE_POOL_2D", k=3, stride=2, padding=SAME)
    mx = b.pool(e, "MAX_POOL_2D", k=3, stride=2, padding=SAME)
    return b.build([b.conv(b.concat([av, mx]), 3, k=1, relu=False)])


def float_more_stages(
    seed: int = 0,
    size: tuple[int, int] = (22, 18),
    out: tuple[int, int] | None = None,
    align_corners: bool = False,
    half_pixel_centers: bool = True,
) -> "fb.ModelT":
    """A float32 network through the float32 stages beyond ``float_stages_unet``'s: SUB (of a
    tensor and a broadcast constant row too), TANH, HARD_SWISH, LEAKY_RELU, PRELU (alpha one row),
    ELU, PADV2 (a non-zero pad value) and RESIZE_BILINEAR (the stride-2 features back to the
    input's size, or to ``out``: a non-integer factor), each between convolutions so they chain."""
    b = ModelBuilder(dtype="FLOAT32", seed=seed)
    h, w = size
    x = b.input([1, h, w, 3])
    a = b.conv(x, 8)

    def unary(t: int, op: str, options_type: int = 0, options=None, extra=()) -> int:
        y = b.activation(list(b.shapes[t]), f"{op.lower()}{len(b.operators)}")
        b._op(op, [t, *extra], [y], options_type, options)
        return y

    s = b.add(a, b.relu(a), op="SUB")
    row = b._tensor([1, 1, 8], "FLOAT32", "sub/row", b.rng.normal(0, 0.5, 8).astype(np.float32))
    s2 = b.activation(list(b.shapes[s]), "sub_row")
    b._op("SUB", [s, row], [s2], fb.BuiltinOptions.SubOptions, fb.SubOptionsT())
    t = unary(s2, "TANH")
    hs = unary(b.conv(t, 8, relu=False), "HARD_SWISH")
    lo = fb.LeakyReluOptionsT()
    lo.alpha = float(np.float32(0.2))
    lr = unary(hs, "LEAKY_RELU", fb.BuiltinOptions.LeakyReluOptions, lo)
    alpha = b._tensor(
        [1, 1, 8], "FLOAT32", "prelu/alpha", b.rng.uniform(0, 0.5, 8).astype(np.float32)
    )
    pr = unary(b.conv(lr, 8, relu=False), "PRELU", extra=(alpha,))
    el = unary(pr, "ELU")
    pads = b._tensor(
        [4, 2],
        "INT32",
        "padv2/paddings",
        np.array([[0, 0], [1, 2], [2, 1], [0, 0]], dtype=np.int32),
    )
    value = b._tensor([], "FLOAT32", "padv2/value", np.array(0.5, dtype=np.float32))
    p2 = b.activation([1, h + 3, w + 3, 8], "padv2")
    b._op("PADV2", [el, pads, value], [p2], fb.BuiltinOptions.PadV2Options, fb.PadV2OptionsT())
    c = b.conv(p2, 8, k=4, padding=VALID)
    low = b.conv(c, 8, stride=2)
    up = b.resize_bilinear(low, out or (h, w), align_corners, half_pixel_centers)
    if out is None or tuple(out) == (h, w):
        up = b.concat([up, c])
    return b.build([b.conv(up, 3, k=1, relu=False)])


def int16_stages_chain(seed: int = 0, h: int = 20, w: int = 12) -> "fb.ModelT":
    """An int16 (16x8) chain with every int16 stage the StreamChain kernel computes: QUANTIZE
    int8 -> int16, CONV_2D with an int64 and with an int32 bias (the two accumulators), a strided
    CONV_2D, DEPTHWISE_CONV_2D (multiplier 2, and 5x5), RELU, MAX_POOL_2D and AVERAGE_POOL_2D
    (SAME, stride 1 and 2), ADD into another scale, CONCATENATION of two scales,
    RESIZE_NEAREST_NEIGHBOR by 2, MUL of two activations, RELU6, SUB of a constant broadcast over
    the rows (each into another scale), LOGISTIC (a power-of-two input scale) and TANH (one that
    takes a multiplier), LEAKY_RELU into another scale, PAD of height and width, then QUANTIZE
    int16 -> int8 and DEQUANTIZE int16 -> float32 outputs."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x8 = b.input([1, h, w, 3])
    b.dtype = "INT16"
    x = b.activation([1, h, w, 3], "int16_input")
    b._op("QUANTIZE", [x8], [x])
    a = b.conv(x, 8)
    b.bias_type = "INT32"
    a2 = b.conv(a, 8, stride=2)
    b.bias_type = "INT64"
    d = b.depthwise(a2, multiplier=2)
    r = b.relu(b.depthwise(d, k=5))
    mx = b.pool(r, "MAX_POOL_2D", k=3, stride=1, padding=SAME)
    s = b.add(mx, r)
    b.tensors[s].quantization.scale = [b.act_scale / 100]  # ADD rescales; CONCATENATION copies
    av = b.pool(b.concat([s, r]), "AVERAGE_POOL_2D", k=3, stride=2, padding=SAME)
    n, ah, aw, ac = b.shapes[av]
    size = b._tensor([2], "INT32", "resize/size", np.array([2 * ah, 2 * aw], dtype=np.int32))
    up = b.activation([n, 2 * ah, 2 * aw, ac], "resize")
    b._op(
        "RESIZE_NEAREST_NEIGHBOR",
        [av, size],
        [up],
        fb.BuiltinOptions.ResizeNearestNeighborOptions,
        fb.ResizeNearestNeighborOptionsT(),
    )
    m = b.add(up, b.conv(up, ac, k=1, relu=False), op="MUL")
    b.tensors[m].quantization.scale = [b.act_scale / 256 * 40]  # MUL: s1 * s2 / s_out
    r6 = b.activation(list(b.shapes[m]), "relu6")  # RELU6 keeps its input's quantization
    b.tensors[r6].quantization.scale = list(b.tensors[m].quantization.scale)
    b._op("RELU6", [m], [r6])
    row = b.rng.integers(-3000, 3000, size=[1, 1, 1, ac]).astype(np.int16)
    const = b._tensor([1, 1, 1, ac], "INT16", "sub/constant", row, [b.act_scale / 256], [0])
    sub = b.add(r6, const, op="SUB")
    b.tensors[sub].quantization.scale = [2.0**-12]  # SUB rescales; LOGISTIC's power-of-two input
    lg = b.activation(list(b.shapes[sub]), "logistic")
    b.tensors[lg].quantization.scale = [2.0**-15]  # TFLM's int16 LOGISTIC and TANH write 2^-15
    b._op("LOGISTIC", [sub], [lg])
    th = b.activation(list(b.shapes[lg]), "tanh")
    b.tensors[th].quantization.scale = [2.0**-15]  # its input scale 2^-15: the multiplier path
    b._op("TANH", [lg], [th])
    lr = b.activation(list(b.shapes[th]), "leaky_relu")
    b.tensors[lr].quantization.scale = [2.0**-14]  # LEAKY_RELU rescales both slopes
    o = fb.LeakyReluOptionsT()
    o.alpha = float(np.float32(0.2))
    b._op("LEAKY_RELU", [th], [lr], fb.BuiltinOptions.LeakyReluOptions, o)
    y = b.conv(b.pad(lr, [[0, 0], [1, 1], [1, 1], [0, 0]]), 4, k=3, padding=VALID, relu=False)
    b.dtype = "INT8"
    q = b.activation(list(b.shapes[y]), "int8_output")
    b._op("QUANTIZE", [y], [q])
    f = b._tensor(list(b.shapes[y]), "FLOAT32", "float_output")
    b._op("DEQUANTIZE", [y], [f])
    return b.build([q, f])


def int16_channel_pad_chain(seed: int = 0, h: int = 16, w: int = 12) -> "fb.ModelT":
    """An int16 (16x8) chain through a PAD of height, width and channels: QUANTIZE int8 -> int16,
    CONV_2D, PAD, CONV_2D (VALID), QUANTIZE int16 -> int8."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x8 = b.input([1, h, w, 3])
    b.dtype = "INT16"
    x = b.activation([1, h, w, 3], "int16_input")
    b._op("QUANTIZE", [x8], [x])
    a = b.conv(b.conv(x, 6), 6)
    y = b.conv(b.pad(a, [[0, 0], [1, 1], [1, 1], [2, 3]]), 4, k=3, padding=VALID, relu=False)
    b.dtype = "INT8"
    q = b.activation(list(b.shapes[y]), "int8_output")
    b._op("QUANTIZE", [y], [q])
    return b.build([q])


def int16_unet_chain(
    seed: int = 0,
    h: int = 16,
    w: int = 12,
    tconv_bias: str | None = "INT64",
    prelu: bool = False,
    tconv_kernel: int = 2,
) -> "fb.ModelT":
    """An int16 (16x8) U-Net: QUANTIZE int8 -> int16, an encoder with a strided CONV_2D, a
    TRANSPOSE_CONV (``tconv_kernel`` square, stride 2, a ``tconv_bias`` bias, None: none) that
    up-samples back, CONCATENATION
    with the skip, a PADV2 of height, width and channels (pad value 1234) in front of a VALID
    CONV_2D, then QUANTIZE int16 -> int8. ``prelu``: a PRELU on the skip (alpha 1 x 1 x C) and one
    on the TRANSPOSE_CONV's output (alpha 1 x W x C, broadcast over the rows only), each int8
    alpha with a zero point, into another output scale."""
    b = ModelBuilder(dtype="INT8", seed=seed)
    x8 = b.input([1, h, w, 3])
    b.dtype = "INT16"
    x = b.activation([1, h, w, 3], "int16_input")
    b._op("QUANTIZE", [x8], [x])
    skip = b.conv(b.conv(x, 8), 8)
    low = b.conv(b.conv(skip, 16, stride=2), 16)
    b.bias_type = tconv_bias or "INT64"
    tconv = b.transpose_conv(low, 8, k=tconv_kernel, bias=tconv_bias is not None)
    b.bias_type = "INT64"
    if prelu:
        skip = _int16_prelu(b, skip, [1, 1, 8], 5)
        tconv = _int16_prelu(b, tconv, [1, w, 8], -7)
    up = b.concat([tconv, skip])
    y = b.conv(b.padv2(up, [[0, 0], [1, 1], [2, 0], [1, 2]], 1234), 8, padding=VALID)
    y = b.conv(y, 4, k=1, relu=False)
    b.dtype = "INT8"
    q = b.activation(list(b.shapes[y]), "int8_output")
    b._op("QUANTIZE", [y], [q])
    return b.build([q])


def _int16_prelu(b: ModelBuilder, x: int, alpha_shape: list[int], alpha_zero_point: int) -> int:
    """An int16 PRELU of ``x`` with a random int8 alpha of ``alpha_shape`` (as TFLM's int16 PRELU
    needs), the output at 3/4 of the input's scale (both multipliers away from 1)."""
    n = len(b.operators)
    data = b.rng.integers(-128, 128, size=alpha_shape).astype(np.int8)
    alpha = b._tensor(alpha_shape, "INT8", f"prelu{n}/alpha", data, [0.004], [alpha_zero_point])
    y = b.activation(list(b.shapes[x]), f"prelu{n}")
    b.tensors[y].quantization.scale = [b.tensors[x].quantization.scale[0] * 0.75]
    b._op("PRELU", [x, alpha], [y])
    return y


def se_seg(
    seed: int = 0,
    size: tuple[int, int] = (24, 20),
    channels: int = 8,
    dtype: str = "INT8",
    mean_quantization: tuple[float, int] | None = None,
    keep_dims: bool = True,
) -> "fb.ModelT":
    """An int8 conv -> squeeze-and-excitation -> conv network (MobileNetV3's SE block): the gate
    is MEAN over height and width, a 1x1 conv with ReLU, a 1x1 conv and LOGISTIC on the
    1 x 1 x 1 x C tensor, and MUL broadcasts it over every row of the features it scales.
    ``mean_quantization``: the MEAN output's (scale, zero point) when it differs from its input's;
    float32 and int16 (16x8): the gate without LOGISTIC (the builder's unary operators are int8).
    ``keep_dims`` False: the MEAN writes 1 x C (Keras' GlobalAveragePooling2D()) and a RESHAPE
    makes it 1 x 1 x 1 x C again, as a hand-written SE block does."""
    b = ModelBuilder(dtype=dtype, seed=seed)
    x = b.input([1, size[0], size[1], 3])
    f = b.conv(b.conv(x, channels), channels)
    pooled = b.mean_hw(f, *(mean_quantization or (None, None)), keep_dims=keep_dims)
    if not keep_dims:
        mean = pooled
        pooled = b.reshape(mean, [1, 1, 1, channels])
        b.tensors[pooled].quantization = copy.deepcopy(b.tensors[mean].quantization)
    squeeze = b.conv(pooled, max(channels // 4, 1), k=1)
    gate = b.conv(squeeze, channels, k=1, relu=False)
    if dtype == "INT8":
        gate = b.unary(gate, "LOGISTIC", 1 / 256, -128)
    scaled = b.add(f, gate, "MUL")
    return b.build([b.conv(b.conv(scaled, channels), 4, k=1, relu=False)])


def gap_head(
    seed: int = 0,
    size: tuple[int, int] = (24, 20),
    channels: int = 8,
    dtype: str = "INT8",
    mean_quantization: tuple[float, int] | None = None,
    keep_dims: bool = True,
) -> "fb.ModelT":
    """A classifier head: two convolutions, a global average pool (MEAN over height and width,
    1 x C without ``keep_dims`` as Keras' GlobalAveragePooling2D() writes it, then a RESHAPE to
    1 x 1 x 1 x C) and a 1x1 convolution to 4 classes. Int8, float32 or int16 (16x8);
    ``mean_quantization``: the MEAN output's (scale, zero point) when it differs from its input's."""
    b = ModelBuilder(dtype=dtype, seed=seed)
    x = b.input([1, size[0], size[1], 3])
    f = b.conv(b.conv(x, channels), channels)
    pooled = b.mean_hw(f, *(mean_quantization or (None, None)), keep_dims=keep_dims)
    if not keep_dims:
        mean = pooled
        pooled = b.reshape(mean, [1, 1, 1, channels])
        b.tensors[pooled].quantization = copy.deepcopy(b.tensors[mean].quantization)
    return b.build([b.conv(pooled, 4, k=1, relu=False)])


def channel_pad_chain(
    seed: int = 0, dtype: str = "INT8", size: tuple[int, int] = (24, 20)
) -> "fb.ModelT":
    """BlazeFace-style blocks (MediaPipe palm and iris models): a strided depthwise branch that
    widens the channels, and a skip that max-pools and PADs its channels up to match before the
    residual ADD; then a PADV2 of height, width and channels (front and back, a pad value other
    than zero) in front of a VALID convolution. Int8 or float32."""
    b = ModelBuilder(dtype=dtype, seed=seed)
    x = b.input([1, size[0], size[1], 3])
    a = b.conv(x, 8)
    branch = b.conv(b.depthwise(a, stride=2), 16, k=1, relu=False)
    skip = b.pad(b.pool(a), [[0, 0], [0, 0], [0, 0], [0, 8]])
    y = b.relu(b.add(branch, skip))
    y = b.conv(
        b.padv2(y, [[0, 0], [1, 1], [2, 0], [3, 5]], 0.5 if dtype == "FLOAT32" else 7),
        8,
        padding=VALID,
    )
    return b.build([b.conv(y, 4, k=1, relu=False)])
