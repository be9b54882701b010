"""Proof by execution: compare an optimized model with the original in TFLM, on random and
edge-case inputs. Without a TFLM tree the optimized model runs lowered to builtins (passes/lower.py)
in the tflite-micro wheel; the lowered model computes what the optimized model's operators are
specified to compute, so equal outputs show the rewrite preserved the function. With a tree, the
model runs as written with TinySeg's kernels (real_kernels.py). The original's outputs on these
inputs are kept by output_cache.py (keyed by its bytes, the input and the interpreter, sealed with
the user's secret), so checking the same original again runs only the optimized model; the
optimized model always runs, and the verdict says when the cache stood in for the original."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..contract import bodies, customops
from ..errors import TinySegError, shown
from ..ir.graph import Graph
from ..ir.modelio import model_to_bytes
from ..ir.schema import NUMPY_DTYPES, TYPE_SIZES
from ..transforms.passes.lower import lower
from . import interpreter, output_cache

# Bumped when random_inputs or edge_input change what they make: the cached outputs of the original
# (output_cache) are keyed by it.
INPUTS_SCHEME = "inputs-1 numpy " + np.__version__


def random_inputs(model: bytes, seed: int, details: list[dict] | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for d in details if details is not None else interpreter.input_details(model):
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.normal(0, 1, size=d["shape"]).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, size=d["shape"]).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, info.max, size=d["shape"], endpoint=True, dtype=dt))
    return out


def _extremes(dt: np.dtype) -> tuple:
    if dt.kind == "f":
        return (-1e3, 1e3) if dt.itemsize >= 4 else (-1e2, 1e2)
    if dt.kind == "b":
        return (False, True)
    info = np.iinfo(dt)
    return (info.min, info.max)


def edge_input(details: list[dict], which: int) -> list[np.ndarray]:
    """Edge case ``which`` (EDGE_NAMES): all-minimum, all-maximum or alternating min/max inputs, where
    saturation and rounding bugs show. Filled in place: no index array as large as the tensor."""
    out = []
    for d in details:
        dt = np.dtype(d["dtype"])
        a, b = _extremes(dt)
        if which < 2:
            out.append(np.full(d["shape"], (a, b)[which], dtype=dt))
            continue
        x = np.empty(int(np.prod(d["shape"], dtype=np.int64)), dtype=dt)
        x[0::2] = a
        x[1::2] = b
        out.append(x.reshape(d["shape"]))
    return out


def edge_inputs(details: list[dict]) -> list[list[np.ndarray]]:
    """All three edge cases (EDGE_NAMES)."""
    return [edge_input(details, k) for k in range(len(EDGE_NAMES))]


EDGE_NAMES = ("all-minimum", "all-maximum", "alternating")


LOWERED = (
    "lowered"  # the fallback: TinySeg operators lowered to builtins, run in the tflite-micro wheel
)
REAL_KERNELS = (
    "real-kernels"  # the model as written, TinySeg's kernels in a host build of a TFLM tree
)


@dataclass(frozen=True)
class Verification:
    runs: int  # random inputs compared
    identical: bool
    detail: str = ""
    edge_cases: int = 0  # edge-case inputs compared besides the random ones
    check: str = LOWERED  # which of the two checks ran
    tflm_dir: str = ""  # the TFLM tree of the real-kernel check
    cached: int = 0  # inputs on which the original's outputs came from output_cache

    def describe(self) -> str:
        """One phrase naming the check, and the cache when it stood in for the original's runs,
        for the output line and the report."""
        if self.check == REAL_KERNELS:
            text = (
                f"real-kernel check: the model as written, TinySeg kernels in a host build of TFLM "
                f"{self.tflm_dir}"
            )
        else:
            text = "fallback check: TinySeg operators lowered to builtins in the tflite-micro wheel (no TFLM tree)"
        total = self.runs + self.edge_cases
        if self.cached:
            text += "; original's outputs from the cache" + (
                f" on {self.cached} of {total} inputs" if self.cached < total else ""
            )
        return text


def arena_for(graph: Graph) -> int:
    """An arena that holds the model with room to spare (the lowered model may need more than the
    original), so models beyond the default 64 MiB can be checked too."""
    from ..memory.planner import plan_graph

    try:
        need = plan_graph(graph).total
    except TinySegError:
        return interpreter.DEFAULT_ARENA
    return max(interpreter.DEFAULT_ARENA, 2 * need + (16 << 20))


# What one run of a model may feed and return (`--max-io-bytes`): the check holds each input and output
# several times over (the inputs, their copy to the TFLM child, the outputs of both models), so a
# model declaring a 2 GB input must be refused before any of it is built.
DEFAULT_MAX_IO_BYTES = 256 << 20
# Inputs and outputs of the runs sent to one TFLM process at a time: more runs (--runs) mean more
# processes, not more memory.
GROUP_IO_BYTES = 256 << 20


def io_bytes(graph: Graph) -> tuple[int, str]:
    """Bytes of one run's inputs and outputs, and the largest of those tensors described."""
    total, big, what = 0, -1, ""
    for t in list(graph.inputs) + list(graph.outputs):
        tensor = graph.tensors[t]
        total += tensor.nbytes
        if tensor.nbytes > big:
            big = tensor.nbytes
            kind = "input" if t in graph.input_set else "output"
            what = f"{kind} {tensor.name!r} {tensor.dtype}{list(tensor.shape)}: {tensor.nbytes:,} B"
    return total, what


def check_io_bytes(graph: Graph, name: str, limit: int = DEFAULT_MAX_IO_BYTES) -> int:
    """Refuse, before any input is built, a model whose one run's inputs and outputs exceed ``limit``."""
    total, what = io_bytes(graph)
    if total > limit:
        raise TinySegError(
            f"{name}: one run's inputs and outputs take {total:,} bytes ({what}), over the "
            f"--max-io-bytes limit of {limit:,}; the check keeps several copies of them in memory, "
            "so raise --max-io-bytes only if this machine has that memory many times over"
        )
    return total


def _groups(count: int, per_run: int) -> list[range]:
    """Runs 0..count-1 in groups whose inputs and outputs fit GROUP_IO_BYTES (at least one run each)."""
    size = max(1, GROUP_IO_BYTES // max(per_run, 1))
    return [range(k, min(k + size, count)) for k in range(0, count, size)]


def _describe(details: list[dict]) -> str:
    return ", ".join(f"{np.dtype(d['dtype'])}{list(d['shape'])}" for d in details) or "none"


def verify(
    original: Graph,
    optimized: Graph,
    runs: int = 3,
    seed: int = 0,
    seconds: float = interpreter.RUN_SECONDS,
    edge_cases: bool = True,
    tflm_dir: str | None = None,
    progress=None,
    max_io_bytes: int = DEFAULT_MAX_IO_BYTES,
) -> Verification:
    """Run the original and the optimized model on ``runs`` random inputs (and the edge cases);
    outputs must be bit-identical. With ``tflm_dir`` (a TFLM tree) the optimized model runs as written
    with TinySeg's kernels (real_kernels.py); without, its lowering runs in the tflite-micro wheel.
    Every run is a child process bounded by ``seconds``. A model whose one run's inputs and outputs
    exceed ``max_io_bytes`` is refused first; the runs go to TFLM in groups of GROUP_IO_BYTES, each
    group's inputs made only when it runs."""
    if runs < 1:
        raise TinySegError(f"verification needs at least one random input (got {runs})")
    per_run = max(
        check_io_bytes(original, "the original", max_io_bytes),
        check_io_bytes(optimized, "the optimized model", max_io_bytes),
    )
    if tflm_dir:
        return verify_real_kernels(
            original, optimized, tflm_dir, runs, seed, seconds, edge_cases, progress, per_run
        )
    a = model_to_bytes(original.model)
    b = model_to_bytes(lower(optimized).graph.model)
    labels = ["the original", "the optimized model (lowered to builtins)"]
    arena = arena_for(original)
    da, db = interpreter.compare_inputs([a, b], labels, arena_size=arena)
    if [(tuple(d["shape"]), np.dtype(d["dtype"])) for d in da] != [
        (tuple(d["shape"]), np.dtype(d["dtype"])) for d in db
    ]:
        raise TinySegError(
            f"the models' inputs differ: {_describe(da)} against {_describe(db)}; "
            "they cannot compute the same function"
        )
    n_edge = len(EDGE_NAMES) if edge_cases else 0
    names = [f"random input {r}" for r in range(runs)] + list(EDGE_NAMES[:n_edge])
    a_sha, cached = output_cache.model_digest(a), 0
    for group in _groups(runs + n_edge, per_run):
        batches = [_batch(a, da, r, runs, seed) for r in group]
        keys = [
            output_cache.key(a_sha, output_cache.wheel_version(), arena, _what(r, runs, seed))
            for r in group
        ]
        ya_all = [output_cache.load(k, per_run) for k in keys]
        if all(y is not None for y in ya_all):  # the original's outputs on these inputs are known
            cached += len(group)
            (yb_all,) = interpreter.run_models(
                [b], batches, labels[1:], arena_size=arena, seconds=seconds
            )
        else:
            ya_all, yb_all = interpreter.run_models(
                [a, b], batches, labels, arena_size=arena, seconds=seconds
            )
            for k, ya in zip(keys, ya_all):
                output_cache.store(k, ya)
        del batches
        detail = _first_difference(group, ya_all, yb_all, names)
        if detail:
            return Verification(runs, False, detail, n_edge, cached=cached)
    return Verification(runs, True, "", n_edge, cached=cached)


def _first_difference(group: range, ya_all: list, yb_all: list, names: list[str]) -> str:
    """Where the original's outputs (ya_all) and the optimized model's first differ; "" if nowhere."""
    for r, ya, yb in zip(group, ya_all, yb_all):
        if len(ya) != len(yb):
            return f"{len(ya)} outputs against {len(yb)}"
        for k, (p, q) in enumerate(zip(ya, yb)):
            if (
                p.shape != q.shape
                or p.dtype != q.dtype
                or not np.array_equal(p, q, equal_nan=p.dtype.kind == "f")
            ):
                diff = int(np.count_nonzero(p != q)) if p.shape == q.shape else -1
                return f"output {k} differs on {names[r]} ({diff} elements)"
    return ""


def _batch(model: bytes, details: list[dict], r: int, runs: int, seed: int) -> list[np.ndarray]:
    """The inputs of run ``r``: random input r (seeded seed + r), then the edge cases."""
    return random_inputs(model, seed + r, details) if r < runs else edge_input(details, r - runs)


def _what(r: int, runs: int, seed: int) -> str:
    """The input of run ``r`` as the output cache names it."""
    name = f"random seed={seed + r}" if r < runs else EDGE_NAMES[r - runs]
    return f"{INPUTS_SCHEME}: {name}"


def _io(graph: Graph, streams: dict | None = None, inputs: bool = True) -> list[tuple]:
    """(name, shape, TFLite type) of each graph input (or output) as the application sees it: a
    streamed one is the whole tensor its row source (sink) hands over (real_kernels.row_streams),
    not the one-element token the graph keeps in its place."""
    out = []
    for k, t in enumerate(graph.inputs if inputs else graph.outputs):
        tensor = graph.tensors[t]
        s = (streams or {}).get(k)
        out.append(
            (tensor.name, s.shape, s.dtype) if s else (tensor.name, tensor.shape, tensor.dtype)
        )
    return out


def _details(graph: Graph, streams: dict | None = None) -> list[dict]:
    out = []
    for name, shape, dtype in _io(graph, streams):
        if NUMPY_DTYPES.get(dtype) is None:
            raise TinySegError(
                f"input '{shown(name)}' has type {dtype}, which the check cannot feed"
            )
        out.append({"shape": tuple(shape), "dtype": np.dtype(NUMPY_DTYPES[dtype])})
    return out


def _split(graph: Graph, data: bytes, streams: dict | None = None) -> list[np.ndarray]:
    """One batch of the runner's output bytes as the graph's output arrays (a sunk output's whole
    tensor in its token's place)."""
    arrays, at = [], 0
    for _, shape, dtype in _io(graph, streams, inputs=False):
        n = math.prod(shape) * TYPE_SIZES.get(dtype, 0)
        dt = np.dtype(NUMPY_DTYPES[dtype]) if dtype in NUMPY_DTYPES else np.uint8
        arrays.append(
            np.frombuffer(data[at : at + n], dtype=dt).reshape(
                shape if dtype in NUMPY_DTYPES else (-1,)
            )
        )
        at += n
    return arrays


def _rows_missing(stats: dict[str, int], streams: tuple[dict, dict], inputs: int) -> str:
    """Why the row sources and sinks did not each hand over every row once per input ("" when
    they did): the runner counts the rows the kernels asked of them."""
    for key, found, what in (
        ("source_rows", streams[0], "row sources delivered"),
        ("sink_rows", streams[1], "row sinks received"),
    ):
        want = sum(s.rows for s in found.values()) * inputs
        if stats.get(key) != want:
            return f"the {what} {stats.get(key)} rows on {inputs} input(s), the model has {want}"
    return ""


def verify_real_kernels(
    original: Graph,
    optimized: Graph,
    tflm_dir: str,
    runs: int = 3,
    seed: int = 0,
    seconds: float = interpreter.RUN_SECONDS,
    edge_cases: bool = True,
    progress=None,
    per_run: int | None = None,
) -> Verification:
    """Both models in one host build of ``tflm_dir`` with TinySeg's kernels: the optimized one exactly as
    written (offline layout, scratch markers, Spill/Fetching/FetchingConv2D through the C++ codec into
    host-RAM storage). Built once and cached (real_kernels.prepare). The runs go to the runner in groups
    (see verify), each group's inputs made only when it runs."""
    from . import real_kernels

    bodies.validate_graph(optimized)  # the kernels refuse it in Prepare; say why before building
    if per_run is None:
        per_run = max(
            check_io_bytes(original, "the original"),
            check_io_bytes(optimized, "the optimized model"),
        )
    exe = real_kernels.prepare(tflm_dir, progress=progress)
    streams = real_kernels.row_streams(optimized)  # fed and collected row by row, as on a device
    da, db = _details(original), _details(optimized, streams[0])
    if [(d["shape"], d["dtype"]) for d in da] != [(d["shape"], d["dtype"]) for d in db]:
        raise TinySegError(
            f"the models' inputs differ: {_describe(da)} against {_describe(db)}; "
            "they cannot compute the same function"
        )
    a = model_to_bytes(original.model)
    b = model_to_bytes(optimized.model)
    n_edge = len(EDGE_NAMES) if edge_cases else 0
    names = [f"random input {r}" for r in range(runs)] + list(EDGE_NAMES[:n_edge])
    arena = arena_for(original)
    done = dict(check=REAL_KERNELS, tflm_dir=str(tflm_dir), cached=0)
    if [io[1:] for io in _io(original, inputs=False)] != [
        io[1:] for io in _io(optimized, streams[1], inputs=False)
    ]:
        return Verification(
            runs, False, "the models' outputs have other shapes or types", n_edge, **done
        )
    per_input = sum(
        1 if op.opcode == customops.SPILL else len(customops.decode(op).spill)
        for op in optimized.operators
        if op.opcode in (customops.SPILL, customops.STREAM_CHAIN)
    )
    n_regions = real_kernels.storage_regions(optimized)  # host RAM for each storage region
    a_sha, runner = output_cache.model_digest(a), "tinyseg_run " + output_cache.file_digest(exe)
    for group in _groups(runs + n_edge, per_run):
        batches = [_batch(a, da, r, runs, seed) for r in group]
        keys = [output_cache.key(a_sha, runner, arena, _what(r, runs, seed)) for r in group]
        cached = [output_cache.load(k, per_run) for k in keys]
        if all(c is not None and len(c) == 1 for c in cached):
            ra_outputs = [c[0].tobytes() for c in cached]
            done["cached"] += len(group)
        else:
            ra_outputs = real_kernels.run(exe, a, batches, arena, seconds, "the original").outputs
            for k, out in zip(keys, ra_outputs):
                output_cache.store(k, [np.frombuffer(out, dtype=np.uint8)])
        rb = real_kernels.run(
            exe, b, batches, arena, seconds, "the optimized model", n_regions, streams
        )
        del batches
        unstreamed = _rows_missing(rb.stats, streams, len(group))
        if unstreamed:
            return Verification(runs, False, unstreamed, n_edge, **done)
        if rb.stats.get("spills") != per_input * len(group):
            # the TinySeg kernels must really have run: each Spill and each StreamChain row stream, once per input
            return Verification(
                runs,
                False,
                f"the TinySeg kernels ran {rb.stats.get('spills')} spills on "
                f"{len(group)} input(s), the model asks for {per_input * len(group)}",
                n_edge,
                **done,
            )
        for r, pa, pb in zip(group, ra_outputs, rb.outputs):
            if pa == pb:
                continue
            for k, (p, q) in enumerate(
                zip(_split(original, pa), _split(optimized, pb, streams[1]))
            ):
                if p.tobytes() != q.tobytes():
                    diff = int(np.count_nonzero(p != q)) if p.shape == q.shape else -1
                    return Verification(
                        runs,
                        False,
                        f"output {k} differs on {names[r]} ({diff} elements)",
                        n_edge,
                        **done,
                    )
            return Verification(runs, False, f"outputs differ on {names[r]}", n_edge, **done)
    return Verification(runs, True, "", n_edge, **done)
