"""Small editing helpers over a copy of a model: the only place passes touch the object API."""
from __future__ import annotations

import copy

import numpy as np

from ..graph import Graph, build_graph
from ..modelio import clone_model
from ..schema import BUILTIN_CODES, TYPE_CODES, fb


class Editor:
    """Edits subgraph ``graph.subgraph`` of a private copy of ``graph.model``."""

    def __init__(self, graph: Graph) -> None:
        self.model = clone_model(graph.model)
        self.sg = self.model.subgraphs[graph.subgraph]
        self.subgraph = graph.subgraph
        if self.sg.operators is None:
            self.sg.operators = []

    # tensors
    def tensor_like(self, index: int, name: str, shape: list[int] | None = None) -> int:
        """A new activation tensor with the type and quantization of tensor ``index``."""
        src = self.sg.tensors[index]
        t = fb.TensorT()
        t.shape = list(src.shape) if shape is None else list(shape)
        t.type = src.type
        t.buffer = 0
        t.name = name.encode()
        t.quantization = copy.deepcopy(src.quantization)
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    def tensor(self, name: str, dtype: str, shape: list[int]) -> int:
        t = fb.TensorT()
        t.shape, t.type, t.buffer, t.name = list(shape), TYPE_CODES[dtype], 0, name.encode()
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    def constant(self, name: str, values: np.ndarray, dtype: str) -> int:
        b = fb.BufferT()
        b.data = np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=np.uint8).copy()
        self.model.buffers.append(b)
        t = fb.TensorT()
        t.shape, t.type, t.name = list(values.shape), TYPE_CODES[dtype], name.encode()
        t.buffer = len(self.model.buffers) - 1
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    # operators
    def opcode(self, name: str, custom: bool = False) -> int:
        codes = self.model.operatorCodes
        for i, c in enumerate(codes):
            b = max(c.builtinCode, c.deprecatedBuiltinCode)
            if custom and b == fb.BuiltinOperator.CUSTOM and (c.customCode or b"").decode() == name:
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

    def make_op(self, name: str, inputs: list[int], outputs: list[int], *, custom_options: bytes | None = None,
                options_type: int = 0, options=None) -> "fb.OperatorT":
        op = fb.OperatorT()
        op.opcodeIndex = self.opcode(name, custom=custom_options is not None)
        op.inputs, op.outputs = list(inputs), list(outputs)
        if custom_options is not None:
            op.customOptions = np.frombuffer(custom_options, dtype=np.uint8).copy()
            op.customOptionsFormat = fb.CustomOptionsFormat.FLEXBUFFERS
        else:
            op.builtinOptionsType, op.builtinOptions = options_type, options
        return op

    def insert(self, position: int, op: "fb.OperatorT") -> None:
        self.sg.operators.insert(position, op)

    def replace(self, position: int, op: "fb.OperatorT") -> None:
        self.sg.operators[position] = op

    def remove(self, position: int) -> None:
        del self.sg.operators[position]

    def rename_uses(self, old: int, new: int, from_position: int) -> None:
        """Operators at ``from_position`` and later read ``new`` where they read ``old``."""
        for op in self.sg.operators[from_position:]:
            op.inputs = [new if i == old else i for i in op.inputs]

    def prune(self) -> None:
        """Drop tensors nothing reads or writes any more: TFLM would still plan them (with an
        empty lifetime that overlaps every other such tensor), wasting arena."""
        sg = self.sg
        used = set(sg.inputs or []) | set(sg.outputs or [])
        for op in sg.operators:
            used.update(i for i in (op.inputs if op.inputs is not None else []) if i >= 0)
            used.update(op.outputs if op.outputs is not None else [])
            used.update(op.intermediates if op.intermediates is not None else [])
        if len(used) == len(sg.tensors):
            return
        keep = [i for i in range(len(sg.tensors)) if i in used]
        remap = {old: new for new, old in enumerate(keep)}

        def m(ids):
            return None if ids is None else [remap[i] if i >= 0 else i for i in ids]

        sg.tensors = [sg.tensors[i] for i in keep]
        for op in sg.operators:
            op.inputs, op.outputs, op.intermediates = m(op.inputs), m(op.outputs), m(op.intermediates)
        sg.inputs, sg.outputs = m(sg.inputs), m(sg.outputs)
        for sig in self.model.signatureDefs or []:
            for tm in list(sig.inputs or []) + list(sig.outputs or []):
                if sig.subgraphIndex == self.subgraph and tm.tensorIndex in remap:
                    tm.tensorIndex = remap[tm.tensorIndex]

    def graph(self) -> Graph:
        self.prune()
        self.model.metadata = [md for md in self.model.metadata or []
                               if (md.name or b"") not in (b"OfflineMemoryAllocation", "OfflineMemoryAllocation")] or None
        return build_graph(self.model, self.subgraph)
