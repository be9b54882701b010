"""A read-only view of a model: tensors, operators, producers, consumers and sizes.

The view is built from the schema's object API (``fb.ModelT``) and keeps a
reference to it, so that passes can edit a copy of the model and build a new
view. Operator and tensor indices are those of the flatbuffer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import TinySegError, shown
from .schema import NUMPY_DTYPES, TYPE_NAMES, TYPE_SIZES, fb, opcode_name


@dataclass(frozen=True)
class Tensor:
    """One tensor of a subgraph, with what memory planning needs to know of it."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str  # schema type name: "INT8", "FLOAT32", ...
    nbytes: int  # element count x element size, as TfLiteEvalTensorByteLength
    is_constant: bool  # backed by a non-empty buffer: never in the arena
    is_variable: bool
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    quantized_dimension: int = 0

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return TYPE_SIZES.get(self.dtype, 0)

    @property
    def numpy_dtype(self) -> str | None:
        return NUMPY_DTYPES.get(self.dtype)


@dataclass(frozen=True)
class Operator:
    """One operator: its name (builtin name or custom code), operands and options."""

    index: int
    opcode: str
    inputs: tuple[int, ...]  # -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options: Any = None  # the schema's <Op>OptionsT object, or None
    custom_options: bytes | None = None
    version: int = 1
    intermediates: tuple[int, ...] = ()

    @property
    def is_custom(self) -> bool:
        return self.options is None and self.custom_options is not None


@dataclass
class Memo:
    """What one run remembers across the many graphs its search builds, so that nothing of it is a
    module global and two runs in one process share nothing (pipeline.Run holds one and every
    graph edited from the run's input shares it).

    ``views``: tensor views by the identity of their fields (tensor_view): an edited copy of the
    model shares those objects (passes/edit.py), so the candidates reuse the views.
    ``encoded`` and ``decoded``: custom-operator options to FlexBuffers bytes and back
    (contract/customops.encode and decode): the chain search encodes the same chains, and the
    planner decodes the same options, many times, and FlexBuffers is slow in Python.
    ``requantized``: a requantizing stage's per-channel table by its scales (contract/requant.py,
    passes/stream.py): the chain search builds the body of every chain it counts."""

    views: dict = field(default_factory=dict)
    encoded: dict = field(default_factory=dict)
    decoded: dict = field(default_factory=dict)
    requantized: dict = field(default_factory=dict)


@dataclass
class Graph:
    """The view of one subgraph of a model (subgraph 0, the one TFLM invokes, by default)."""

    model: "fb.ModelT"
    subgraph: int
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    producers: dict[int, int] = field(default_factory=dict)
    consumers: dict[int, list[int]] = field(default_factory=dict)
    memo: Memo = field(default_factory=Memo, repr=False, compare=False)

    @cached_property
    def activations(self) -> list[int]:
        """Tensors that live in the arena: not constant, not variable, not empty."""
        return [
            t.index
            for t in self.tensors
            if not t.is_constant and not t.is_variable and t.nbytes > 0
        ]

    @cached_property
    def activation_set(self) -> frozenset[int]:
        """``activations`` as a set, for membership tests (models can have thousands)."""
        return frozenset(self.activations)

    @cached_property
    def input_set(self) -> frozenset[int]:
        return frozenset(self.inputs)

    @cached_property
    def output_set(self) -> frozenset[int]:
        return frozenset(self.outputs)

    def tensor(self, index: int) -> Tensor:
        return self.tensors[index]

    def op_inputs(self, op: Operator) -> list[Tensor]:
        return [self.tensors[i] for i in op.inputs if i >= 0]

    def op_outputs(self, op: Operator) -> list[Tensor]:
        return [self.tensors[i] for i in op.outputs]

    def buffer_array(self, tensor_index: int) -> np.ndarray | None:
        """The constant data of a tensor as a numpy array of its shape, or None."""
        t = self.tensors[tensor_index]
        raw = self.model.subgraphs[self.subgraph].tensors[tensor_index]
        buf = self.model.buffers[raw.buffer].data if self.model.buffers else None
        if buf is None or len(buf) == 0 or t.numpy_dtype is None:
            return None
        arr = np.frombuffer(np.asarray(buf, dtype=np.uint8).tobytes(), dtype=t.numpy_dtype)
        return arr.reshape(t.shape) if t.shape else arr


def _decode(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _quantization(q: Any) -> tuple[tuple[float, ...], tuple[int, ...], int]:
    """Scales, zero points and quantized dimension of a quantization object (None: none)."""
    if q is None:
        return (), (), 0
    # tolist(), not a generator over numpy scalars: per-channel parameters of wide layers run to
    # thousands of values.
    scales = tuple(np.asarray(q.scale, np.float64).tolist()) if q.scale is not None else ()
    zps = tuple(np.asarray(q.zeroPoint, np.int64).tolist()) if q.zeroPoint is not None else ()
    return scales, zps, int(q.quantizedDimension)


def tensor_view(
    model: "fb.ModelT", raw: "fb.TensorT", index: int, where: str, memo: dict | None = None
) -> Tensor:
    """The view of one tensor. ``memo`` (a run's ``Memo.views``) reuses the view of a tensor
    whose fields are the very objects seen before: an edited copy of a model shares them
    (passes/edit.py), and the optimizer builds the view of hundreds of candidates."""
    buf = (
        model.buffers[raw.buffer]
        if model.buffers and 0 <= raw.buffer < len(model.buffers)
        else None
    )
    is_constant = buf is not None and buf.data is not None and len(buf.data) > 0
    q = raw.quantization
    key = (index, id(raw.name), id(raw.shape), id(q), raw.type, raw.isVariable, is_constant)
    if memo is not None:
        hit = memo.get(key)
        if hit is not None and hit[0] is raw.name and hit[1] is raw.shape and hit[2] is q:
            return hit[3]
    dtype = TYPE_NAMES.get(raw.type, f"TYPE_{raw.type}")
    shape = tuple(int(d) for d in (raw.shape if raw.shape is not None else []))
    if any(d < 0 for d in shape):
        raise TinySegError(
            f"{where}: tensor {index} '{shown(raw.name or b'')}' has a dynamic shape {list(shape)}; TFLM needs static shapes"
        )
    scales, zps, qdim = _quantization(q)
    nbytes = math.prod(shape) * TYPE_SIZES.get(dtype, 0)
    view = Tensor(
        index,
        _decode(raw.name),
        shape,
        dtype,
        nbytes,
        is_constant,
        bool(raw.isVariable),
        scales,
        zps,
        qdim,
    )
    if memo is not None:
        memo[key] = (
            raw.name,
            raw.shape,
            q,
            view,
        )  # the objects are kept alive: their ids stay their own
    return view


def build_graph(
    model: "fb.ModelT", subgraph: int = 0, name: str = "model", memo: Memo | None = None
) -> Graph:
    """Build the view of one subgraph (``memo``: that of the run, shared by the graphs it edits)."""
    if not model.subgraphs or subgraph >= len(model.subgraphs):
        raise TinySegError(f"{name}: the model has no subgraph {subgraph}")
    sg = model.subgraphs[subgraph]
    where = f"{name}: subgraph {subgraph}"
    memo = Memo() if memo is None else memo
    tensors = [
        tensor_view(model, raw, i, where, memo.views) for i, raw in enumerate(sg.tensors or [])
    ]
    codes = model.operatorCodes or []
    operators: list[Operator] = []
    producers: dict[int, int] = {}
    consumers: dict[int, list[int]] = {}
    for i, raw in enumerate(sg.operators or []):
        code = codes[raw.opcodeIndex]
        custom = (
            bytes(np.asarray(raw.customOptions, dtype=np.uint8).tobytes())
            if raw.customOptions is not None
            else None
        )
        op = Operator(
            index=i,
            opcode=opcode_name(code),
            inputs=tuple(int(x) for x in (raw.inputs if raw.inputs is not None else [])),
            outputs=tuple(int(x) for x in (raw.outputs if raw.outputs is not None else [])),
            options=raw.builtinOptions,
            custom_options=custom,
            version=int(code.version),
            intermediates=tuple(
                int(x) for x in (raw.intermediates if raw.intermediates is not None else [])
            ),
        )
        operators.append(op)
        for t in op.outputs:
            producers.setdefault(t, i)
        for t in op.inputs:
            if t >= 0:
                lst = consumers.setdefault(t, [])
                if not lst or lst[-1] != i:
                    lst.append(i)
    inputs = tuple(int(x) for x in (sg.inputs if sg.inputs is not None else []))
    outputs = tuple(int(x) for x in (sg.outputs if sg.outputs is not None else []))
    return Graph(model, subgraph, tensors, operators, inputs, outputs, producers, consumers, memo)
