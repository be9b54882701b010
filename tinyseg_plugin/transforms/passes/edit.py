"""The Editor: the one place that builds or changes flatbuffer schema objects.

Passes say what to change in terms of tensors and operators (a SPLIT_V here, a CONCATENATION there, a
custom operator with these options); the Editor makes the schema objects on a private copy of the model.
``commit`` drops the tensors nothing uses any more and returns the new graph with its tensor index remap
(index in the edited copy -> index in the new graph), so anything keyed by tensor index (the offline
layout's offset table, a pass's own bookkeeping) is translated through the remap, never re-counted.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ...ir import offline
from ...ir.graph import Graph, build_graph
from ...ir.schema import BUILTIN_CODES, TYPE_CODES, fb

# Builtin operators the Editor can make from scratch, with their options type and class.
_OPTIONS = {
    "CONCATENATION": (fb.BuiltinOptions.ConcatenationOptions, fb.ConcatenationOptionsT),
    "SPLIT_V": (fb.BuiltinOptions.SplitVOptions, fb.SplitVOptionsT),
    "CONV_2D": (fb.BuiltinOptions.Conv2DOptions, fb.Conv2DOptionsT),
}


def _shallow(obj: Any) -> Any:
    """copy.copy of a schema object without copy's generic protocol (a third of a candidate edit)."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


def clone_model(model: "fb.ModelT") -> "fb.ModelT":
    """A copy for the Editor to change, copied down to the objects the Editor assigns to (the model, its
    lists, subgraphs, tensors, operators, signature defs); deeper objects (buffer data, quantization,
    builtin options, custom option bytes) are shared, since nothing changes them in place. A deep copy
    of a 300-operator model per candidate edit was most of the optimizer's time."""
    m = copy.copy(model)
    m.buffers = list(model.buffers) if model.buffers is not None else None
    m.operatorCodes = list(model.operatorCodes) if model.operatorCodes is not None else None
    m.metadata = list(model.metadata) if model.metadata is not None else None
    m.signatureDefs = copy.deepcopy(model.signatureDefs)
    subgraphs = []
    for sg in model.subgraphs or []:
        s = copy.copy(sg)
        s.tensors = [_shallow(t) for t in sg.tensors] if sg.tensors is not None else None
        s.operators = [_shallow(op) for op in sg.operators] if sg.operators is not None else None
        subgraphs.append(s)
    m.subgraphs = subgraphs if model.subgraphs is not None else None
    return m


def _ids(values: Any) -> list[int]:
    """A tensor index vector of the object API (None, a list or a numpy array) as a list of ints."""
    return [] if values is None else [int(v) for v in values]


def _name(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")


@dataclass(frozen=True)
class Edited:
    """The outcome of an edit: the new graph, and where each tensor of the edited copy went.
    A tensor index absent from ``remap`` was dropped (nothing read or wrote it)."""

    graph: Graph
    remap: dict[int, int]


class Op:
    """An operator the Editor built, to be placed with ``insert`` or ``replace`` (opaque to passes)."""

    __slots__ = ("raw",)

    def __init__(self, raw: "fb.OperatorT") -> None:
        self.raw = raw


class Editor:
    """Edits subgraph ``graph.subgraph`` of a private copy of ``graph.model``."""

    def __init__(self, graph: Graph) -> None:
        self.model = clone_model(graph.model)
        self.subgraph = graph.subgraph
        self.sg = self.model.subgraphs[graph.subgraph]
        if self.sg.operators is None:
            self.sg.operators = []
        if self.sg.tensors is None:
            self.sg.tensors = []
        self._offline: dict[int, int] | None = None
        self.memo = graph.memo

    @property
    def operator_count(self) -> int:
        return len(self.sg.operators)

    # ------------------------------------------------------------------ tensors
    def _add_tensor(self, t: "fb.TensorT") -> int:
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    def tensor_like(self, index: int, name: str, shape: Sequence[int] | None = None) -> int:
        """A new activation tensor with the type and quantization of tensor ``index``."""
        src = self.sg.tensors[index]
        t = fb.TensorT()
        t.shape = list(_ids(src.shape)) if shape is None else [int(d) for d in shape]
        t.type = src.type
        t.buffer = 0
        t.name = name.encode()
        t.quantization = copy.deepcopy(src.quantization)
        return self._add_tensor(t)

    def tensor(self, name: str, dtype: str, shape: Sequence[int]) -> int:
        """A new tensor with no data (an activation, or a marker whose shape carries a setting)."""
        t = fb.TensorT()
        t.shape, t.type, t.buffer, t.name = (
            [int(d) for d in shape],
            TYPE_CODES[dtype],
            0,
            name.encode(),
        )
        return self._add_tensor(t)

    def quantized_tensor(
        self,
        name: str,
        dtype: str,
        shape: Sequence[int],
        scales: Sequence[float],
        zero_points: Sequence[int],
        quantized_dimension: int = 0,
    ) -> int:
        """A new activation tensor with this quantization (none when ``scales`` is empty)."""
        index = self.tensor(name, dtype, shape)
        if scales:
            q = fb.QuantizationParametersT()
            q.scale = [float(x) for x in scales]
            q.zeroPoint = [int(z) for z in zero_points]
            q.quantizedDimension = int(quantized_dimension)
            self.sg.tensors[index].quantization = q
        return index

    def constant(self, name: str, values: np.ndarray, dtype: str) -> int:
        """A new constant tensor holding ``values`` in a buffer of its own."""
        b = fb.BufferT()
        b.data = np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=np.uint8).copy()
        self.model.buffers.append(b)
        t = fb.TensorT()
        t.shape, t.type, t.name = list(values.shape), TYPE_CODES[dtype], name.encode()
        t.buffer = len(self.model.buffers) - 1
        return self._add_tensor(t)

    def tensor_name(self, index: int) -> str:
        return _name(self.sg.tensors[index].name)

    def shape_signatures(self) -> dict[int, list[int]]:
        """Each tensor's ``shape_signature`` (-1: a dimension the exporter left dynamic), for the
        tensors that have one; the graph view reads only the static ``shape``, which TFLM uses."""
        return {
            i: _ids(t.shapeSignature)
            for i, t in enumerate(self.sg.tensors)
            if t.shapeSignature is not None
        }

    def drop_shape_signature(self, index: int) -> None:
        """Tensor ``index`` keeps only its static shape, as an export with every dimension fixed has."""
        self.sg.tensors[index].shapeSignature = None

    # ------------------------------------------------------------------ operators
    def opcode(self, name: str, custom: bool = False) -> int:
        """The operator code index of a builtin (version 1) or custom operator, added if missing."""
        codes = self.model.operatorCodes
        if codes is None:
            codes = self.model.operatorCodes = []
        for i, c in enumerate(codes):
            b = max(c.builtinCode, c.deprecatedBuiltinCode)
            if custom and b == fb.BuiltinOperator.CUSTOM and _name(c.customCode) == name:
                return i
            if not custom and b == BUILTIN_CODES[name] and c.version == 1:
                return i
        c = fb.OperatorCodeT()
        code = fb.BuiltinOperator.CUSTOM if custom else BUILTIN_CODES[name]
        c.builtinCode, c.deprecatedBuiltinCode, c.version = code, min(code, 127), 1
        if custom:
            c.customCode = name.encode()
        codes.append(c)
        return len(codes) - 1

    def _builtin(
        self, name: str, inputs: Iterable[int], outputs: Iterable[int], **fields: Any
    ) -> Op:
        op = fb.OperatorT()
        op.opcodeIndex = self.opcode(name)
        op.inputs, op.outputs = [int(i) for i in inputs], [int(o) for o in outputs]
        options_type, cls = _OPTIONS[name]
        options = cls()
        for k, v in fields.items():
            setattr(options, k, v)
        op.builtinOptionsType, op.builtinOptions = options_type, options
        return Op(op)

    def builtin(
        self,
        name: str,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: str | None,
        fields: dict[str, Any],
        version: int = 1,
    ) -> Op:
        """Any builtin operator, its options given by class name ("Conv2DOptions") and field values
        (how a StreamChain keeps the operators of its body)."""
        op = fb.OperatorT()
        op.opcodeIndex = self.opcode_version(name, version)
        op.inputs, op.outputs = [int(i) for i in inputs], [int(o) for o in outputs]
        if options is not None:
            cls = getattr(fb, options + "T", None)
            kind = getattr(fb.BuiltinOptions, options, None)
            if cls is None or kind is None:
                raise ValueError(f"unknown builtin options {options!r}")
            obj = cls()
            for k, v in fields.items():
                if not hasattr(obj, k):
                    raise ValueError(f"{options} has no field {k!r}")
                setattr(obj, k, v)
            op.builtinOptionsType, op.builtinOptions = kind, obj
        return Op(op)

    def opcode_version(self, name: str, version: int) -> int:
        """The operator code index of a builtin at this version, added if missing."""
        if version == 1:
            return self.opcode(name)
        codes = self.model.operatorCodes
        for i, c in enumerate(codes or []):
            if (
                max(c.builtinCode, c.deprecatedBuiltinCode) == BUILTIN_CODES[name]
                and c.version == version
            ):
                return i
        if codes is None:
            codes = self.model.operatorCodes = []
        c = fb.OperatorCodeT()
        code = BUILTIN_CODES[name]
        c.builtinCode, c.deprecatedBuiltinCode, c.version = code, min(code, 127), int(version)
        codes.append(c)
        return len(codes) - 1

    def concatenation(self, inputs: Sequence[int], output: int, axis: int) -> Op:
        return self._builtin("CONCATENATION", inputs, [output], axis=int(axis))

    def split_v(
        self, source: int, sizes: Sequence[int], axis: int, outputs: Sequence[int], name: str
    ) -> Op:
        """SPLIT_V of ``source`` into ``outputs`` (``sizes`` slices along ``axis``), with its two constants."""
        size_t = self.constant(f"{name}/split_sizes", np.array(list(sizes), np.int32), "INT32")
        axis_t = self.constant(f"{name}/split_axis", np.array(axis, np.int32), "INT32")
        return self._builtin("SPLIT_V", [source, size_t, axis_t], outputs, numSplits=len(outputs))

    def conv2d(
        self,
        inputs: Sequence[int],
        output: int,
        *,
        padding: int,
        stride_h: int,
        stride_w: int,
        dilation_h: int,
        dilation_w: int,
        activation: int,
        quantized_bias_type: int = 0,
    ) -> Op:
        return self._builtin(
            "CONV_2D",
            inputs,
            [output],
            padding=padding,
            strideH=stride_h,
            strideW=stride_w,
            dilationHFactor=dilation_h,
            dilationWFactor=dilation_w,
            fusedActivationFunction=activation,
            quantizedBiasType=quantized_bias_type,
        )

    def custom(
        self, name: str, inputs: Sequence[int], outputs: Sequence[int], options: bytes
    ) -> Op:
        """A custom operator with FlexBuffers options."""
        op = fb.OperatorT()
        op.opcodeIndex = self.opcode(name, custom=True)
        op.inputs, op.outputs = [int(i) for i in inputs], [int(o) for o in outputs]
        op.customOptions = np.frombuffer(options, dtype=np.uint8).copy()
        op.customOptionsFormat = fb.CustomOptionsFormat.FLEXBUFFERS
        return Op(op)

    def set_custom_options(self, position: int, options: bytes) -> None:
        """New FlexBuffers options for the custom operator at ``position`` (same operands)."""
        self.sg.operators[position].customOptions = np.frombuffer(options, dtype=np.uint8).copy()

    def like(self, position: int, inputs: Sequence[int], outputs: Sequence[int]) -> Op:
        """A copy of the operator at ``position`` (same code and options) over other operands."""
        op = copy.deepcopy(self.sg.operators[position])
        op.inputs, op.outputs = [int(i) for i in inputs], [int(o) for o in outputs]
        return Op(op)

    @staticmethod
    def _raw(op: "Op | fb.OperatorT") -> "fb.OperatorT":
        return op.raw if isinstance(op, Op) else op

    def insert(self, position: int, op: "Op | fb.OperatorT") -> None:
        self.sg.operators.insert(position, self._raw(op))

    def replace(self, position: int, op: "Op | fb.OperatorT") -> None:
        self.sg.operators[position] = self._raw(op)

    def remove(self, position: int) -> None:
        del self.sg.operators[position]

    def reorder(self, order: Sequence[int]) -> None:
        """Run the operators in ``order`` (a permutation of the current positions)."""
        ops = list(self.sg.operators)
        if sorted(order) != list(range(len(ops))):
            raise ValueError("reorder: not a permutation of the operators")
        self.sg.operators = [ops[i] for i in order]

    def rebuild(self, items: Sequence["int | Op"]) -> None:
        """A new operator list: an int keeps the operator at that current position, an Op is placed as is."""
        ops = list(self.sg.operators)
        self.sg.operators = [ops[i] if isinstance(i, int) else i.raw for i in items]

    def set_input(self, position: int, k: int, tensor: int) -> None:
        """The operator at ``position`` reads ``tensor`` as its input ``k`` (its other readers of the
        old tensor are left as they are)."""
        op = self.sg.operators[position]
        inputs = _ids(op.inputs)
        inputs[k] = int(tensor)
        op.inputs = inputs

    def set_intermediates(self, position: int, tensors: Sequence[int]) -> None:
        self.sg.operators[position].intermediates = [int(t) for t in tensors] or None

    def drop_intermediates_named(self, name: str) -> None:
        """Remove intermediate tensors with this name (markers) from every operator."""
        for op in self.sg.operators:
            kept = [t for t in _ids(op.intermediates) if self.tensor_name(t) != name]
            op.intermediates = kept or None

    def rename_uses(self, old: int, new: int, from_position: int) -> None:
        """Operators at ``from_position`` and later read ``new`` where they read ``old``."""
        for op in self.sg.operators[from_position:]:
            op.inputs = [new if i == old else i for i in _ids(op.inputs)]

    def rename_outputs(self, old: int, new: int) -> None:
        """The subgraph's outputs name ``new`` where they named ``old``."""
        self.sg.outputs = [new if i == old else i for i in _ids(self.sg.outputs)]

    def rename_graph_tensor(self, old: int, new: int) -> None:
        """The subgraph's inputs and outputs, and its signature's entries, name ``new`` where they
        named ``old`` (a streamed graph input or output replaced by its token)."""
        self.sg.inputs = [new if i == old else i for i in _ids(self.sg.inputs)]
        self.rename_outputs(old, new)
        for sig in self.model.signatureDefs or []:
            if sig.subgraphIndex == self.subgraph:
                for tm in list(sig.inputs or []) + list(sig.outputs or []):
                    if tm.tensorIndex == old:
                        tm.tensorIndex = new

    def offline_offsets(self, offsets: dict[int, int]) -> None:
        """Pin these tensors (indices of this editor's copy) at these arena offsets with
        OfflineMemoryAllocation metadata; every other tensor is planned online. The table is sized
        and indexed after pruning, in ``commit``."""
        self._offline = dict(offsets)

    # ------------------------------------------------------------------ commit
    def prune(self) -> dict[int, int]:
        """Drop tensors nothing reads or writes any more (TFLM would still plan them, with an empty
        lifetime that overlaps every other such tensor, wasting arena). Returns the remap."""
        sg = self.sg
        n = len(sg.tensors)
        used = set(_ids(sg.inputs)) | set(_ids(sg.outputs))
        for op in sg.operators:
            used.update(i for i in _ids(op.inputs) if i >= 0)
            used.update(_ids(op.outputs))
            used.update(_ids(op.intermediates))
        keep = [i for i in range(n) if i in used]
        remap = {old: new for new, old in enumerate(keep)}
        if len(keep) == n:
            return remap

        def m(ids: Any) -> list[int] | None:
            return None if ids is None else [remap[i] if i >= 0 else i for i in _ids(ids)]

        sg.tensors = [sg.tensors[i] for i in keep]
        for op in sg.operators:
            op.inputs, op.outputs, op.intermediates = (
                m(op.inputs),
                m(op.outputs),
                m(op.intermediates),
            )
        sg.inputs, sg.outputs = m(sg.inputs), m(sg.outputs)
        for sig in self.model.signatureDefs or []:
            if sig.subgraphIndex != self.subgraph:
                continue
            for tm in list(sig.inputs or []) + list(sig.outputs or []):
                if tm.tensorIndex in remap:
                    tm.tensorIndex = remap[tm.tensorIndex]
        return remap

    def _drop_offline_metadata(self) -> None:
        """Any edit invalidates a stored layout (lifetimes and indices change): drop it and its data."""
        kept = []
        for md in self.model.metadata or []:
            if offline.is_offline(md):
                referenced = {t.buffer for sg in self.model.subgraphs for t in sg.tensors or []}
                if (
                    self.model.buffers
                    and 0 < md.buffer < len(self.model.buffers)
                    and md.buffer not in referenced
                ):
                    self.model.buffers[md.buffer] = (
                        fb.BufferT()
                    )  # empty it; the shared data is not touched
                continue
            kept.append(md)
        self.model.metadata = kept or None

    def _write_offline_metadata(self, remap: dict[int, int]) -> None:
        base = offline.subgraph_base(self.model, self.subgraph)
        values = [offline.ONLINE] * sum(len(sg.tensors or []) for sg in self.model.subgraphs)
        for t, off in (self._offline or {}).items():
            if t in remap:
                values[base + remap[t]] = int(off)
        data = offline.encode(values)
        buf = fb.BufferT()
        buf.data = np.frombuffer(data, dtype=np.uint8).copy()
        self.model.buffers.append(buf)
        md = fb.MetadataT()
        md.name = offline.NAME.encode()
        md.buffer = len(self.model.buffers) - 1
        self.model.metadata = list(self.model.metadata or []) + [md]

    def commit(self) -> Edited:
        """Prune, refresh the layout metadata, and build the new graph."""
        remap = self.prune()
        self._drop_offline_metadata()
        if self._offline is not None:
            self._write_offline_metadata(remap)
        return Edited(build_graph(self.model, self.subgraph, memo=self.memo), remap)

    def graph(self) -> Graph:
        """``commit().graph``, for passes that need no remap."""
        return self.commit().graph
