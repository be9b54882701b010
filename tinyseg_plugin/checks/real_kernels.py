"""The real-kernel check: run a model as written in a host build of TFLM with TinySeg's kernels.

``tinyseg verify --tflm-dir DIR`` (or TFLM_DIR) and the check inside ``optimize`` use this instead
of the lowering in verify.py when a TFLM tree is at hand. The optimized model runs exactly as a
device runs it: its OfflineMemoryAllocation layout, its TRANSPOSE_CONV scratch markers, Spill /
Fetching / FetchingConv2D with the C++ codec and a RAM-backed SpillManager (flash replaced by host
memory); the original runs in the same build, and the outputs must be bit-identical.

Why a cache: building TFLM's microlite takes minutes. The user's tree is never written to: it is
copied once into the cache (keyed by its path and the content of the files the installer edits),
``tinyseg tflm install`` runs on the copy, and ``make microlite`` plus the runner
(tflm_ops/tools/tinyseg_run.cc) are built there. When our runtime sources change, the install
updates the copy and make recompiles only what changed; the runner executable is keyed by the
hash of the runtime sources, so a stale one is never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import deadline
from ..deploy.tflm_install import INSTALL_DIR, find_sources, install
from ..errors import TinySegError
from ..ir.modelio import cache_root
from ..ir.schema import TYPE_SIZES
from . import interpreter

ENV_TFLM = "TFLM_DIR"
ENV_CACHE = "TINYSEG_CACHE_DIR"
MAKEFILE = "tensorflow/lite/micro/tools/make/Makefile"
FLAG_NAMES = ("CXX", "CXXFLAGS", "INCLUDES", "LDFLAGS", "MICROLITE_LIBS", "MICROLITE_LIB_PATH")
KERNEL_DIRS = (
    "reference",
    "cmsis_nn",
)  # TFLM's OPTIMIZED_KERNEL_DIR (none for reference): a build's kernel set
# TFLM's release_with_logs build: NDEBUG turns off the DCHECKs in the reference kernels' inner loops
# (measured: one ResUNet-a inference 30.2 s in the default build, 4.7 s in this one) and keeps the
# error messages; no structure changes size, so arena figures are those of any build. The test
# suite builds TFLM the same way, so every copy of a tree shares one set of objects.
BUILD_TYPE = "release_with_logs"
# TFLM's signal library (audio front-end operators) is left out of microlite: none of it is a builtin
# operator, and no program here (the runner, the arena probe, the kernel tests) registers its operators,
# so the linker would never pull its objects from the archive: the executables are the same without
# it, and a first build compiles 38 fewer sources per kernel set and target. Every make of a tree
# passes it, so no later make compiles them (tests/tflm_probe, tests/tflm_e2e).
NO_SIGNAL = "MICROLITE_CC_SIGNAL_KERNEL_SRCS="
RUNNER = "tinyseg_run"
BUILD_SECONDS = 3600.0
STORAGE_BYTES = 64 << 20  # host RAM standing in for the spill flash
# A sanitizer build (tests/test_hostile_bodies.py): what TinySeg adds to TFLM (its kernels, its core,
# the TFLM kernel files the installer edits) and the runner compiled with ASan and UBSan, linked ahead
# of the plain microlite, so TFLM's own objects are reused rather than compiled a second time. Any
# report aborts the runner (exit != 0, the report on stderr).
SANITIZE_FLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
SANITIZE_GENDIR = "gen_sanitize"
# The TFLM file the installer edits that each kernel set compiles (TRANSPOSE_CONV's scratch narrowing).
EDITED_KERNEL = {
    "reference": "tensorflow/lite/micro/kernels/transpose_conv.cc",
    "cmsis_nn": "tensorflow/lite/micro/kernels/cmsis_nn/transpose_conv.cc",
}
# The files of a TFLM tree the build and the installer rely on: they identify its content in the cache key.
TREE_FILES = (
    MAKEFILE,
    "tensorflow/lite/micro/kernels/Makefile.inc",
    "tensorflow/lite/micro/kernels/transpose_conv.cc",
    "tensorflow/lite/micro/kernels/conv.cc",
    "tensorflow/lite/micro/micro_interpreter.h",
    "tensorflow/lite/micro/micro_allocator.cc",
)


@dataclass(frozen=True)
class RunnerOutput:
    outputs: list[bytes]  # per batch: the raw bytes of every output, concatenated
    stats: dict[str, int]  # the runner's printed figures (head, tail, spills, ...)


# ---------------------------------------------------------------- where the build lives


def check_tree(tflm_dir: str) -> Path:
    """The TFLM tree as an absolute path; a clear error if it is not a make-buildable TFLM tree."""
    root = Path(tflm_dir).expanduser()
    if not root.exists():
        raise TinySegError(f"--tflm-dir {tflm_dir}: no such directory")
    if not root.is_dir():
        raise TinySegError(f"--tflm-dir {tflm_dir}: not a directory")
    missing = [f for f in TREE_FILES if not (root / f).is_file()]
    if missing:
        raise TinySegError(
            f"--tflm-dir {tflm_dir}: not a TFLM tree with its make build (no {missing[0]})"
        )
    if not (root / "tensorflow/lite/micro/tools/make/downloads/flatbuffers").is_dir():
        raise TinySegError(
            f"--tflm-dir {tflm_dir}: its third-party downloads are missing "
            "(tensorflow/lite/micro/tools/make/downloads); nothing is downloaded here"
        )
    return root.resolve()


def tree_key(root: Path) -> str:
    """The checkout's path and the content of the files the build and the installer rely on."""
    h = hashlib.sha256(str(root).encode() + b"\0")
    for rel in TREE_FILES:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _digest(directory: Path, h) -> None:
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(directory)).encode() + b"\0" + p.read_bytes() + b"\0")


def runner_source() -> Path:
    src = find_sources().tflm_ops / "tools" / f"{RUNNER}.cc"
    if not src.is_file():
        raise TinySegError(f"the runner source {src} is missing from this installation")
    return src


def runtime_key(kernel_dir: str) -> str:
    """Our kernels, core, runner and installer (which edits TFLM's files): a change to any of them means a
    new runner."""
    h = hashlib.sha256(kernel_dir.encode() + b"\0" + BUILD_TYPE.encode() + b"\0")
    ops = find_sources().tflm_ops
    for sub in ("kernels", "core", "tools"):
        _digest(ops / sub, h)
    h.update(Path(__file__).parents[1].joinpath("deploy", "tflm_install.py").read_bytes())
    return h.hexdigest()[:16]


def resolve_tflm_dir(given: str | None) -> str | None:
    """--tflm-dir, else $TFLM_DIR, else None (the fallback check runs)."""
    return given or os.environ.get(ENV_TFLM) or None


# ---------------------------------------------------------------- building


def _env() -> dict[str, str]:
    """TFLM's Makefile runs python3 (numpy, PIL) while it parses: put this interpreter first."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _run(cmd: list[str], cwd: Path, what: str, timeout: float = BUILD_SECONDS) -> str:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise TinySegError(f"{what} did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise TinySegError(f"{what}: cannot run {cmd[0]} ({exc.strerror})") from None
    if proc.returncode != 0:
        tail = [ln for ln in (proc.stdout + proc.stderr).strip().splitlines() if ln.strip()][
            -1:
        ] or ["no output"]
        raise TinySegError(f"{what} failed (exit {proc.returncode}): {tail[0][:300]}")
    return proc.stdout + proc.stderr


def _make_args(kernel_dir: str, target: Sequence[str] = ()) -> list[str]:
    """TFLM make variables for a build: ours, then ``target`` (e.g. TARGET=cortex_m_qemu TARGET_ARCH=cortex-m7)."""
    if kernel_dir not in KERNEL_DIRS:
        raise TinySegError(
            f"kernel_dir must be one of {', '.join(KERNEL_DIRS)}, not {kernel_dir!r}"
        )
    return (
        [f"BUILD_TYPE={BUILD_TYPE}", NO_SIGNAL]
        + (["OPTIMIZED_KERNEL_DIR=cmsis_nn"] if kernel_dir == "cmsis_nn" else [])
        + list(target)
    )


def make_flags(
    tree: Path, kernel_dir: str = "reference", target: Sequence[str] = ()
) -> dict[str, str]:
    """The compiler and flags TFLM's Makefile uses for the build (the host's unless ``target`` says)."""
    out = _run(
        ["make", "-f", MAKEFILE, *_make_args(kernel_dir, target)]
        + [f"print-{n}" for n in FLAG_NAMES],
        tree,
        "asking TFLM's Makefile for its flags",
    )
    values: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in FLAG_NAMES and name not in values:
            values[name] = value
    missing = set(FLAG_NAMES) - set(values)
    if missing:
        raise TinySegError(f"TFLM's Makefile did not report {sorted(missing)}")
    return values


def _sanitized_sources(tree: Path, kernel_dir: str) -> list[Path]:
    """What TinySeg puts into the build: its kernels, its core and the TFLM kernel file it edits."""
    ours = tree / INSTALL_DIR
    return (
        sorted(ours.glob("*.cc"))
        + sorted((ours / "core" / "src").glob("*.cc"))
        + [tree / EDITED_KERNEL[kernel_dir]]
    )


def _compile_sanitized(tree: Path, f: dict[str, str], kernel_dir: str, jobs: int) -> list[Path]:
    """TinySeg's sources compiled with ASan and UBSan (-O1, as ASan advises), ``jobs`` at a time."""
    out = tree / SANITIZE_GENDIR / kernel_dir
    out.mkdir(parents=True, exist_ok=True)
    base = shlex.split(f["CXX"]) + shlex.split(f["CXXFLAGS"]) + ["-O1"] + SANITIZE_FLAGS.split()
    jobs_: list[tuple[list[str], Path]] = []
    for src in _sanitized_sources(tree, kernel_dir):
        obj = out / (str(src.relative_to(tree)).replace("/", "_") + ".o")
        cmd = base + shlex.split(f["INCLUDES"]) + ["-c", str(src), "-o", str(obj)]
        jobs_.append((cmd, obj))
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        list(pool.map(lambda j: _run(j[0], tree, f"compiling {j[1].name} with sanitizers"), jobs_))
    return [obj for _, obj in jobs_]


def build_runner(
    tree: Path,
    exe: Path,
    source: Path,
    kernel_dir: str = "reference",
    jobs: int = 2,
    target: Sequence[str] = (),
    sanitize: bool = False,
) -> Path:
    """microlite (with TinySeg's kernels, already installed in ``tree``), then the runner at ``exe``.
    ``target`` builds for another TFLM target: cortex_m_qemu's runner runs under qemu-arm, its file
    I/O through semihosting. ``sanitize``: a host runner whose TinySeg parts carry ASan and UBSan
    (SANITIZE_FLAGS), linked ahead of the plain library so they replace its copies."""
    f = make_flags(tree, kernel_dir, target)
    library = tree / f["MICROLITE_LIB_PATH"].strip()
    # TFLM's make adds to the archive (ar -r): a kernel file a newer runtime no longer has would
    # stay in it beside the file that now defines its symbols. Archiving anew costs a second.
    library.unlink(missing_ok=True)
    _run(
        ["make", "-f", MAKEFILE, *_make_args(kernel_dir, target), "microlite", f"-j{jobs}"],
        tree,
        "building TFLM's microlite",
    )
    objects = _compile_sanitized(tree, f, kernel_dir, jobs) if sanitize else []
    flags = ["-O1", *SANITIZE_FLAGS.split()] if sanitize else ["-O2"]
    exe.parent.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f".{exe.name}.tmp")
    cmd = (
        shlex.split(f["CXX"])
        + shlex.split(f["CXXFLAGS"])
        + flags
        + shlex.split(f["INCLUDES"])
        + ["-o", str(tmp), str(source), *map(str, objects), str(library)]
        + shlex.split(f["LDFLAGS"])
        + shlex.split(f["MICROLITE_LIBS"])
    )
    _run(cmd, tree, f"compiling {source.name}")
    os.replace(tmp, exe)
    return exe


def _copy_tree(root: Path, tree: Path) -> None:
    """The user's checkout into the cache (renamed into place when complete); copy2 keeps mtimes, so a
    build already in its gen/ is reused and make rebuilds only what the install changes."""
    staged = Path(tempfile.mkdtemp(prefix=".tree-", dir=tree.parent))
    try:
        shutil.copytree(
            root,
            staged / "t",
            symlinks=True,
            ignore=lambda d, names: [".git"] if Path(d) == root else [],
        )
        os.replace(staged / "t", tree)
    except OSError as exc:
        raise TinySegError(f"cannot copy {root} into the cache {tree.parent}: {exc}") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def prepare(
    tflm_dir: str,
    kernel_dir: str = "reference",
    progress: Callable[[str], None] | None = None,
    sanitize: bool = False,
) -> Path:
    """The runner executable for this TFLM tree and our runtime sources, built once and cached
    (``sanitize``: with ASan and UBSan, for the hostile-model test)."""
    root = check_tree(tflm_dir)
    work = cache_root() / f"tflm-{tree_key(root)}"
    exe = (
        work
        / "bin"
        / f"{RUNNER}-{kernel_dir}{'-sanitize' if sanitize else ''}-{runtime_key(kernel_dir)}"
    )
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    try:
        work.mkdir(parents=True, exist_ok=True)
        lock = open(work / "lock", "w")
    except OSError as exc:
        raise TinySegError(f"cannot use the cache directory {work}: {exc.strerror}") from None
    with (
        lock,
        deadline.paused(extend=True),
    ):  # a one-time build: not the model's time (--time-limit)
        fcntl.flock(lock, fcntl.LOCK_EX)  # another tinyseg may be building the same tree
        if exe.is_file():
            return exe
        tree = work / "tree"
        if not tree.is_dir():
            if progress:
                progress(f"copying {root} into {work} (once; your tree is not modified)")
            _copy_tree(root, tree)
        install(str(tree))
        if progress:
            progress(
                f"building TFLM with TinySeg's kernels in {tree} (once per TFLM tree and runtime; minutes)"
            )
        build_runner(tree, exe, runner_source(), kernel_dir, sanitize=sanitize)
        (work / "SOURCE").write_text(f"{root}\n", encoding="utf-8")
    return exe


# ---------------------------------------------------------------- running


# TFLM's own lines around a kernel's refusal: they say which step failed, not why.
_BOILERPLATE = re.compile(
    r"^(Node .* failed to (prepare|invoke)|Failed starting model allocation|"
    r"Failed to (allocate|prepare)|.*AllocateTensors\(\) failed)",
    re.IGNORECASE,
)
_SOURCE_PREFIX = re.compile(r"^\S*\.(cc|h|cpp)(:\d+)?:?\s+")


def failure_reason(stderr: str) -> str:
    """One line: the runner's failing step and the reason a kernel printed before it (the first
    MicroPrintf or TF_LITE_ENSURE line, its source path dropped), as the runner itself only knows
    that AllocateTensors or Invoke failed."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    step = next((ln for ln in lines if ln.startswith(f"{RUNNER}:")), None)
    reasons = [
        _SOURCE_PREFIX.sub("", ln)
        for ln in lines
        if not ln.startswith(f"{RUNNER}:") and not _BOILERPLATE.match(ln)
    ]
    if step is None:
        return (reasons[-1] if reasons else "no message")[:300]
    step = step[len(RUNNER) + 1 :].strip()
    return f"{step}: {reasons[0]}"[:300] if reasons else step[:300]


def storage_regions(graph) -> int:
    """How many storage regions the TinySeg operators of ``graph`` (an ir Graph) reach: the highest
    region their options name, plus one (1 for a model in region 0 alone, or none)."""
    from ..contract import customops

    highest = 0
    for op in graph.operators:
        if not customops.is_tinyseg_op(op):
            continue
        o = customops.decode(op)
        if isinstance(o, customops.SpillOptions):
            highest = max(highest, o.region)
        elif isinstance(o, customops.StreamChainOptions):
            highest = max([highest, *(r for _, r in o.slot_regions)])
        else:
            fetching = o.fetching if isinstance(o, customops.FetchingConv2DOptions) else o
            highest = max([highest, *(f.region for f in fetching.fetched)])
    return highest + 1


@dataclass(frozen=True)
class RowStream:
    """A graph input a row source hands over, or a graph output a row sink takes (a StreamChain
    body's "source" or "sink"): the whole body tensor, ``rows`` rows of ``row_bytes`` each (NHWC:
    H rows of W*C elements)."""

    row_bytes: int
    rows: int
    shape: tuple[int, ...]
    dtype: str  # the TFLite type name, as the body tensor has it

    def option(self, index: int) -> str:
        """The runner's ``K:ROW_BYTES:ROWS`` for graph input or output ``index``."""
        return f"{index}:{self.row_bytes}:{self.rows}"


def _row_stream(tensor, index: int, what: str) -> RowStream:
    shape = tuple(int(d) for d in tensor.shape)
    row = math.prod(shape[-2:]) * TYPE_SIZES.get(tensor.dtype, 0)
    if len(shape) < 3 or math.prod(shape[:-3]) != 1 or min(shape) < 1 or not row:
        raise TinySegError(
            f"the row {what} of graph {'input' if what == 'source' else 'output'} {index} is "
            f"{tensor.dtype}{list(shape)}, not one image of rows"
        )
    return RowStream(row, shape[-3], shape, tensor.dtype)


def row_streams(graph) -> tuple[dict[int, RowStream], dict[int, RowStream]]:
    """The row sources and sinks the StreamChain bodies of ``graph`` (an ir Graph) name: {graph
    input index: RowStream} and {graph output index: RowStream}; both empty for a model that
    holds its inputs and outputs whole."""
    from ..contract import customops

    sources: dict[int, RowStream] = {}
    sinks: dict[int, RowStream] = {}
    for op in graph.operators:
        if op.opcode != customops.STREAM_CHAIN:
            continue
        o = customops.decode(op, graph.memo.decoded)
        first = len(op.inputs) + len(op.outputs)  # local ids of the body tensors start here
        for pairs, found, what in ((o.source, sources, "source"), (o.sink, sinks, "sink")):
            for local, index in pairs:
                found[index] = _row_stream(o.tensors[local - first], index, what)
    return sources, sinks


def stream_options(sources: dict[int, RowStream], sinks: dict[int, RowStream]) -> list[str]:
    """The runner's --source and --sink options for these row streams."""
    return [a for k, s in sorted(sources.items()) for a in ("--source", s.option(k))] + [
        a for k, s in sorted(sinks.items()) for a in ("--sink", s.option(k))
    ]


def run(
    exe: Path,
    model: bytes,
    batches: list[list[np.ndarray]],
    arena_size: int,
    seconds: float,
    what: str,
    regions: int = 1,
    streams: tuple[dict[int, RowStream], dict[int, RowStream]] = ({}, {}),
) -> RunnerOutput:
    """Run ``model`` on every batch in one process; a crash, a hang or a refusal is a TinySegError.
    ``regions``: storage regions to attach (0 .. regions-1, each STORAGE_BYTES of host RAM), as
    storage_regions counts them for the model. ``streams``: its row sources and sinks (row_streams);
    a batch then holds a sourced input's whole image in the token's place, and the outputs come
    back with a sunk output's whole image in its token's place."""
    with tempfile.TemporaryDirectory(prefix="tinyseg-run-") as d:
        mpath, ipath, opath = Path(d) / "model.tflite", Path(d) / "in.bin", Path(d) / "out.bin"
        mpath.write_bytes(model)
        with open(ipath, "wb") as f:  # one input at a time: no second copy of all of them
            for batch in batches:
                for x in batch:
                    f.write(np.ascontiguousarray(x).reshape(-1).view(np.uint8))
        cmd = [
            str(exe),
            str(mpath),
            str(ipath),
            str(opath),
            "--batches",
            str(len(batches)),
            "--arena",
            str(arena_size),
            "--storage",
            str(STORAGE_BYTES),
            *["--ram-region", str(STORAGE_BYTES)] * (regions - 1),
            *stream_options(*streams),
        ]
        # --time-limit bounds each inference (all run in one process) and the whole run
        deadline.check(f"running {what}")
        limit, timeout = interpreter.bounds(seconds * max(1, len(batches)))
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                preexec_fn=lambda: interpreter.cpu_limit(limit),
            )
        except subprocess.TimeoutExpired:
            deadline.check(f"running {what}")
            raise TinySegError(
                f"TFLM did not finish running {what} on {len(batches)} input(s) within "
                f"{timeout:g} s of wall-clock time while hardly computing "
                "(real-kernel check; stopped; is the machine suspended or swapping?)"
            ) from None
        except OSError as exc:
            raise TinySegError(f"cannot start the TFLM runner {exe}: {exc.strerror}") from None
        if interpreter.stopped_by_cpu_limit(proc.returncode):
            deadline.check(f"running {what}")
            raise TinySegError(
                f"TFLM did not finish running {what} on {len(batches)} input(s) within {limit:g} s "
                f"of CPU ({seconds:g} s each; real-kernel check; stopped; raise the limit with "
                "--time-limit if the model is just slow)"
            )
        if proc.returncode < 0:
            try:
                name = signal.Signals(-proc.returncode).name
            except ValueError:
                name = f"signal {-proc.returncode}"
            raise TinySegError(f"TFLM crashed ({name}) while running {what} (real-kernel check)")
        if proc.returncode != 0:
            raise TinySegError(
                f"TFLM cannot run {what} (real-kernel check): {failure_reason(proc.stderr)}"
            )
        data = opath.read_bytes()
    stats = {}
    for line in proc.stdout.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            stats[name] = int(value)
    n = len(batches)
    if len(data) % n:
        raise TinySegError(f"the TFLM runner wrote {len(data)} output bytes for {n} batches")
    step = len(data) // n
    return RunnerOutput([data[i * step : (i + 1) * step] for i in range(n)], stats)
