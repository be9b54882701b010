"""Static shapes: the first pass, so an export with the batch left unset is planned, spilled and
streamed as the same network exported with ``batch_size=1``.

A Keras model exported with the batch unset carries ``shape_signature`` -1 in dimension 0 of its
input and of every tensor whose batch follows, and computes the shapes TRANSPOSE_CONV and RESHAPE
need at run time: SHAPE -> STRIDED_SLICE (the batch) -> PACK (with the constant height, width and
channels). TFLM ignores both (it runs every tensor at its static ``shape``, batch 1, and its
TRANSPOSE_CONV and RESHAPE size their outputs from that shape, not from the shape operand), but
the chain is arena traffic, and an operand that is not a constant keeps TRANSPOSE_CONV out of
StreamChain. This pass
- drops the dynamic batch: a ``shape_signature`` whose only -1 is dimension 0 of a tensor whose
  static batch is 1 is dropped, as an export with ``batch_size=1`` writes none;
- folds each shape operand of TRANSPOSE_CONV and RESHAPE that SHAPE, STRIDED_SLICE, PACK and
  CONCATENATION compute from static shapes into an int32 constant, only when the value is the one
  TFLM uses (the operator's static output shape), and removes the operators that leaves unread.
Any other dynamic dimension (height, width, ...) is a Skip with the reason: its value is not known.
"""

from __future__ import annotations

import numpy as np

from ...ir.graph import Graph, Operator
from . import Rewrite, Skip
from .edit import Editor

NOTHING = "no dynamic batch and no run-time-computed shape"

# The operand that carries the shape an operator's output has, by operator.
SHAPE_OPERAND = {"TRANSPOSE_CONV": 0, "RESHAPE": 1}
# Operators that compute nothing but a value from their inputs: removed once nothing reads them.
PURE = frozenset(
    {"SHAPE", "STRIDED_SLICE", "PACK", "CONCATENATION", "RESHAPE", "SQUEEZE", "EXPAND_DIMS"}
)


def _batch_fixes(graph: Graph, signatures: dict[int, list[int]]) -> list[int] | Skip:
    """The tensors whose only dynamic dimension is a batch of 1, or a Skip naming the first tensor
    with another dynamic dimension."""
    fixes = []
    for i, sig in sorted(signatures.items()):
        dynamic = [k for k, d in enumerate(sig) if d < 0]
        if not dynamic:
            continue
        t = graph.tensors[i]
        if dynamic != [0]:
            dims = ", ".join(str(k) for k in dynamic if k != 0)
            return Skip(
                f"tensor {i} '{t.name}' has shape_signature {sig}: dimension {dims} is dynamic, "
                "and only a dynamic batch (dimension 0) can be fixed; export the model with a fixed "
                "input size"
            )
        if len(sig) != len(t.shape) or t.shape[0] != 1 or list(t.shape[1:]) != sig[1:]:
            return Skip(
                f"tensor {i} '{t.name}' has shape_signature {sig} but static shape "
                f"{list(t.shape)}: its batch is not 1"
            )
        fixes.append(i)
    return fixes


def _strided_slice(graph: Graph, op: Operator, x: np.ndarray) -> np.ndarray | None:
    """TFLite's STRIDED_SLICE of a shape vector (rank 1, constant begin/end/strides, no ellipsis,
    no new axis, no offset); None when it is any other kind."""
    o = op.options
    if x.ndim != 1 or len(op.inputs) != 4 or o is None:
        return None
    if o.ellipsisMask or o.newAxisMask or getattr(o, "offset", False):
        return None
    parts = [graph.buffer_array(t) if t >= 0 else None for t in op.inputs[1:]]
    if any(p is None or p.size != 1 for p in parts):
        return None
    begin, end, stride = (int(p.reshape(-1)[0]) for p in parts)  # type: ignore[union-attr]
    if stride == 0:
        return None
    if o.shrinkAxisMask & 1:
        b = 0 if o.beginMask & 1 else begin
        b = b + len(x) if b < 0 else b
        return np.array(x[b], np.int64) if 0 <= b < len(x) else None
    b = None if o.beginMask & 1 else begin
    e = None if o.endMask & 1 else end
    return x[slice(b, e, stride)]


def _value(graph: Graph, t: int, chain: set[int], depth: int = 0) -> np.ndarray | None:
    """The value tensor ``t`` holds when every tensor has its static shape, for constants and the
    shape arithmetic Keras exports (adding the operators it ran to ``chain``); None otherwise."""
    if t < 0 or depth > 16:
        return None
    tensor = graph.tensors[t]
    if tensor.is_constant:
        data = graph.buffer_array(t)
        if data is None or data.size != tensor.elements:
            return None
        return data.astype(np.int64).reshape(tensor.shape)  # a scalar too (buffer_array: 1-D)
    i = graph.producers.get(t)
    if i is None or tensor.dtype not in ("INT32", "INT64"):
        return None
    value = _computed(graph, graph.operators[i], chain, depth)
    if value is None or tuple(value.shape) != tensor.shape:
        return None
    chain.add(i)
    return value


def _computed(graph: Graph, op: Operator, chain: set[int], depth: int) -> np.ndarray | None:
    """The value the shape arithmetic ``op`` computes from its inputs' values (_value's)."""
    args = op.inputs
    if op.opcode == "SHAPE" and len(args) == 1 and args[0] >= 0:
        return np.array(graph.tensors[args[0]].shape, np.int64)
    if op.opcode == "STRIDED_SLICE" and args:
        x = _value(graph, args[0], chain, depth + 1)
        return None if x is None else _strided_slice(graph, op, x)
    if op.opcode == "PACK" and op.options is not None:
        xs = [_value(graph, a, chain, depth + 1) for a in args]
        if any(x is None or x.ndim != 0 for x in xs) or op.options.axis not in (0, -1):
            return None
        return np.array([int(x) for x in xs], np.int64)  # type: ignore[arg-type]
    if op.opcode == "CONCATENATION" and op.options is not None:
        xs = [_value(graph, a, chain, depth + 1) for a in args]
        if any(x is None or x.ndim != 1 for x in xs) or op.options.axis not in (0, -1):
            return None
        if op.options.fusedActivationFunction:
            return None
        return np.concatenate(xs)  # type: ignore[arg-type]
    return None


def _tflm_shape(graph: Graph, op: Operator, value: np.ndarray) -> bool:
    """Whether ``value`` is the shape TFLM gives the output (its static shape): exactly, or for
    RESHAPE with the one -1 TFLM resolves from the input's element count."""
    out = graph.tensors[op.outputs[0]].shape if op.outputs else None
    if out is None or value.ndim != 1 or len(value) != len(out):
        return False
    if op.opcode == "RESHAPE" and list(value).count(-1) == 1:
        known = int(np.prod([v for v in value if v != -1]))
        elements = graph.tensors[op.inputs[0]].elements
        if known <= 0 or elements % known:
            return False
        value = np.where(value == -1, elements // known, value)
    return [int(v) for v in value] == list(out)


def _identity(graph: Graph, op: Operator) -> bool:
    """A RESHAPE (of a folded shape) to the shape it reads, same type and quantization: a copy
    the converter drops when the batch is 1; kept when it writes a graph output."""
    if op.opcode != "RESHAPE" or op.outputs[0] in graph.output_set:
        return False
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return (x.shape, x.dtype, x.scales, x.zero_points, x.quantized_dimension) == (
        y.shape,
        y.dtype,
        y.scales,
        y.zero_points,
        y.quantized_dimension,
    )


def _dead(
    graph: Graph, inputs: dict[int, list[int]], keep: frozenset[int] = frozenset()
) -> set[int]:
    """PURE operators (not in ``keep``) none of whose outputs is read (``inputs``: each operator's
    inputs) nor a graph output, found from the last operator back so that a chain dies whole."""
    readers: dict[int, int] = {}
    for args in inputs.values():
        for t in set(args):
            if t >= 0:
                readers[t] = readers.get(t, 0) + 1
    dead: set[int] = set()
    for op in reversed(graph.operators):
        if op.opcode not in PURE or op.index in keep or not op.outputs:
            continue
        if any(readers.get(t, 0) or t in graph.output_set for t in op.outputs):
            continue
        dead.add(op.index)
        for t in set(inputs[op.index]):
            if t >= 0:
                readers[t] -= 1
    return dead


def _foldable(graph: Graph) -> dict[int, tuple[int, int, np.ndarray]]:
    """Operator -> (operand, tensor, value) for each TRANSPOSE_CONV and RESHAPE whose shape
    operand is computed and folds to the output shape TFLM uses."""
    folded = {}
    for op in graph.operators:
        k = SHAPE_OPERAND.get(op.opcode)
        if k is None or len(op.inputs) <= k or op.inputs[k] < 0:
            continue
        t = op.inputs[k]
        if graph.tensors[t].is_constant:
            continue
        value = _value(graph, t, set())
        if value is not None and _tflm_shape(graph, op, value):
            folded[op.index] = (k, t, value)
    return folded


def _bypass(ed: Editor, graph: Graph, identities: list[int]) -> None:
    """The readers of each identity RESHAPE's output read what it reads (through a chain of them)."""
    alias: dict[int, int] = {}
    for i in identities:
        op = graph.operators[i]
        source = op.inputs[0]
        source = alias.get(source, source)
        alias[op.outputs[0]] = source
        ed.rename_uses(op.outputs[0], source, 0)


def _detail(
    graph: Graph, fixes: list[int], kept: list[int], removed: list[int], identities: list[int]
) -> str:
    parts = []
    if fixes:
        parts.append(f"batch fixed to 1 on {len(fixes)} tensors")
    if kept:
        ops = ", ".join(f"op {i} {graph.operators[i].opcode}" for i in kept)
        parts.append(f"constant shape operand of {ops}")
    if removed:
        what = " and identity RESHAPEs" if identities else ""
        parts.append(f"{len(removed)} shape operators{what} removed")
    return "; ".join(parts)


def static_shapes(graph: Graph, request: None = None) -> Rewrite | Skip:
    """Fix a dynamic batch to 1 and fold run-time-computed shapes (module docstring). The
    rewrite's ``notes`` are (operator index in ``graph``, opcode, what was done) for each
    operator the pass changed or removed."""
    ed = Editor(graph)
    fixes = _batch_fixes(graph, ed.shape_signatures())
    if isinstance(fixes, Skip):
        return fixes
    folded = _foldable(graph)
    if not fixes and not folded:
        return Skip(NOTHING)
    inputs = {op.index: list(op.inputs) for op in graph.operators}
    for i, (k, _, _) in folded.items():
        inputs[i][k] = -1  # for _dead: the operand is a constant from now on
    # Only what the folding leaves unread goes: an operator unread in the input stays, as it was.
    before = frozenset(_dead(graph, {op.index: list(op.inputs) for op in graph.operators}))
    dead = _dead(graph, inputs, before)
    folded = {i: f for i, f in folded.items() if i not in dead}  # a dead RESHAPE just goes
    identities = [i for i in sorted(folded) if _identity(graph, graph.operators[i])]
    kept = [i for i in sorted(folded) if i not in identities]
    for i in fixes:
        ed.drop_shape_signature(i)
    notes: list[tuple[int, str, str]] = []
    constants: dict[tuple[int, bytes], int] = {}
    for i in kept:
        k, t, value = folded[i]
        data = value.astype(np.int32)
        key = (t, data.tobytes())
        if key not in constants:
            constants[key] = ed.constant(graph.tensors[t].name, data, "INT32")
        ed.set_input(i, k, constants[key])
        notes.append((i, graph.operators[i].opcode, f"shape operand {list(map(int, data))}"))
    _bypass(ed, graph, identities)
    removed = sorted(dead | set(identities))
    for i in reversed(removed):
        ed.remove(i)
    notes.extend((i, graph.operators[i].opcode, "removed") for i in removed)
    detail = _detail(graph, fixes, kept, removed, identities)
    return Rewrite.of(ed.commit(), detail, notes=tuple(sorted(notes)))


def in_input_indices(stream: dict, fixed: Rewrite, graph: Graph) -> dict:
    """A streaming estimate over ``fixed.graph`` (``stream_search.choice_dict``) with its operator
    and tensor indices those of ``graph``, the model the user gave: the pass only removes
    operators (its notes say which) and keeps every activation."""
    removed = {i for i, _, what in fixed.notes if what == "removed"}
    ops = [op.index for op in graph.operators if op.index not in removed]
    back = {new: old for old, new in fixed.remap.items()}

    def tensors(ids: list) -> list:
        return [back[t] for t in ids]

    chains = []
    for c in stream["chains"]:
        c = dict(c)
        c["operators"] = [ops[i] for i in c["operators"]]
        for key in ("reads", "fetches", "sources", "writes", "spills", "sinks"):
            c[key] = tensors(c[key])
        c["ring_rows"] = {str(back[int(t)]): r for t, r in c["ring_rows"].items()}
        chains.append(c)
    return {**stream, "chains": chains}
