"""Hostile input files and paths through the real command line.

Every bad input is built here from the committed Tiny U-Net (examples/models/tiny_unet.tflite) with
the project's own model IO, and run through ``python -m tinyseg_plugin.cli`` in a child process. A
refusal must be: exit code 2, exactly one line on stderr, no traceback, and the working directory
exactly as it was (no output file, no temporary file, every input byte for byte the same, links
still links).
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, TINY_UNET, spilled_skip_graphs

from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import load_model, model_to_bytes, parse_model
from tinyseg_plugin.ir.schema import BUILTIN_CODES, TYPE_CODES, fb, opcode_name
from tinyseg_plugin.memory.planner import plan_graph


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TFLM_DIR", None)  # the fallback check: no TFLM build in this module
    return subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _snapshot(d: Path) -> dict[str, object]:
    """Every entry under ``d``: a link's target, a file's hash, or "dir"."""
    out: dict[str, object] = {}
    for p in sorted(d.rglob("*")):
        key = str(p.relative_to(d))
        if p.is_symlink():
            out[key] = ("link", os.readlink(p))
        elif p.is_dir():
            out[key] = "dir"
        elif not p.is_file():
            out[key] = ("special", stat.S_IFMT(p.lstat().st_mode))
        else:
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


_TALLY = {"refusals": 0, "slowest": 0.0}


@pytest.fixture(scope="module", autouse=True)
def _tally_line(counts):
    """One line of figures for the run's summary (tests/conftest.py `counts`)."""
    yield
    counts(
        f"hostile CLI: {_TALLY['refusals']} crafted inputs refused, each with exit 2, one line, no "
        f"traceback, no output written and the inputs unchanged; slowest {_TALLY['slowest']:.1f} s"
    )


def _refused(args: list[str], cwd: Path, message: str) -> str:
    """Run ``args``; assert the refusal contract; return the one line."""
    before = _snapshot(cwd)
    start = time.monotonic()
    r = _run(args, cwd)
    _TALLY["slowest"] = max(_TALLY["slowest"], time.monotonic() - start)
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("tinyseg: error: "), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert message in lines[0], lines[0]
    assert _snapshot(cwd) == before, "a refused command changed the directory"
    _TALLY["refusals"] += 1
    return lines[0]


def _model(path: Path, mutate=None, model: "fb.ModelT | None" = None) -> Path:
    """The Tiny U-Net (or ``model``), changed by ``mutate``, written to ``path`` without validation."""
    m = load_model(TINY_UNET) if model is None else model
    if mutate is not None:
        mutate(m)
    path.write_bytes(model_to_bytes(m))
    return path


# ---------------------------------------------------------------- outputs that are inputs or each other


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "m.tflite").write_bytes(TINY_UNET.read_bytes())
    return tmp_path


PATH_CASES = {
    "optimize --report is the model": (
        ["optimize", "m.tflite", "-o", "o.tflite", "--report", "m.tflite"],
        "--report m.tflite is the input model",
    ),
    "optimize --plot is the model": (
        ["optimize", "m.tflite", "-o", "o.tflite", "--plot", "m.tflite"],
        "--plot m.tflite is the input model",
    ),
    "optimize --report is -o": (
        ["optimize", "m.tflite", "-o", "o.tflite", "--report", "o.tflite"],
        "are the same file",
    ),
    "optimize --plot is --report": (
        ["optimize", "m.tflite", "-o", "o.tflite", "--report", "r", "--plot", "./r"],
        "are the same file",
    ),
    "optimize -o is the model": (
        ["optimize", "m.tflite", "-o", "./m.tflite"],
        "is the input model",
    ),
    "analyze --json is the model": (
        ["analyze", "m.tflite", "--json", "m.tflite"],
        "--json m.tflite is the input",
    ),
    "analyze --plot is the model": (
        ["analyze", "m.tflite", "--plot", "m.tflite"],
        "--plot m.tflite is the input",
    ),
    "analyze --json is --plot": (
        ["analyze", "m.tflite", "--json", "a.out", "--plot", "a.out"],
        "are the same file",
    ),
}


@pytest.mark.parametrize("case", list(PATH_CASES))
def test_an_output_that_is_an_input_or_another_output_is_refused(work: Path, case: str) -> None:
    args, message = PATH_CASES[case]
    _refused(args, work, message)


def test_a_csv_file_that_is_the_model_is_refused(work: Path) -> None:
    d = work / "csv"
    d.mkdir()
    (d / "tensors.csv").write_bytes(TINY_UNET.read_bytes())
    _refused(
        ["analyze", "csv/tensors.csv", "--csv", "csv"],
        work,
        "--csv csv/tensors.csv is the input model",
    )
    _refused(
        ["analyze", "m.tflite", "--csv", "csv", "--json", "csv/buffers.csv"],
        work,
        "are the same file",
    )


def test_links_to_the_model_are_the_model(work: Path) -> None:
    os.link(work / "m.tflite", work / "hard.tflite")
    (work / "soft.tflite").symlink_to("m.tflite")
    (work / "dir").mkdir()
    (work / "dir" / "up.json").symlink_to("../m.tflite")
    _refused(["optimize", "m.tflite", "-o", "hard.tflite"], work, "is the input model")
    _refused(["optimize", "m.tflite", "-o", "soft.tflite"], work, "is the input model")
    _refused(
        ["optimize", "soft.tflite", "-o", "o.tflite", "--report", "hard.tflite"],
        work,
        "is the input model",
    )
    _refused(["analyze", "m.tflite", "--json", "dir/up.json"], work, "is the input model")
    (work / "loop1").symlink_to("loop2")
    (work / "loop2").symlink_to("loop1")
    _refused(["optimize", "m.tflite", "-o", "loop1"], work, "never reaches a file")


def test_an_output_that_is_a_fifo_is_refused(work: Path) -> None:
    """Replacing it would swap a FIFO (or, for root, a device such as /dev/null) for a regular file."""
    os.mkfifo(work / "fifo")
    _refused(
        ["optimize", "m.tflite", "-o", "o.tflite", "--report", "fifo"], work, "not a regular file"
    )
    _refused(["analyze", "m.tflite", "--plot", "fifo"], work, "not a regular file")


def test_an_output_link_is_written_through(work: Path) -> None:
    """-o naming a symbolic link replaces the file it names; the link stays a link."""
    (work / "real.tflite").write_bytes(b"old")
    (work / "link.tflite").symlink_to("real.tflite")
    r = _run(
        ["optimize", "m.tflite", "-o", "link.tflite", "--runs", "1", "-q", "--no-stream"], work
    )
    assert r.returncode == 0, r.stderr
    assert (work / "link.tflite").is_symlink() and os.readlink(
        work / "link.tflite"
    ) == "real.tflite"
    assert build_graph(load_model(work / "real.tflite")).operators  # a whole model, not b"old"
    assert (work / "m.tflite").read_bytes() == TINY_UNET.read_bytes()
    assert not [p for p in work.iterdir() if p.name.startswith(".")]  # no temporary file left


# ---------------------------------------------------------------- models no command may crash on


def _call_once(m: "fb.ModelT", target: int) -> "fb.OperatorT":
    if not any(c.builtinCode == BUILTIN_CODES["CALL_ONCE"] for c in m.operatorCodes):
        code = fb.OperatorCodeT()
        code.builtinCode, code.deprecatedBuiltinCode, code.version = (
            BUILTIN_CODES["CALL_ONCE"],
            127,
            1,
        )
        m.operatorCodes.append(code)
    op = fb.OperatorT()
    op.opcodeIndex = next(
        i for i, c in enumerate(m.operatorCodes) if c.builtinCode == BUILTIN_CODES["CALL_ONCE"]
    )
    op.inputs, op.outputs = [], []
    op.builtinOptionsType = fb.BuiltinOptions.CallOnceOptions
    op.builtinOptions = fb.CallOnceOptionsT()
    op.builtinOptions.initSubgraphIndex = target
    return op


def _with_calls(edges: list[tuple[int, int]]):
    """Subgraph 0 calls subgraph 1; ``edges`` (caller, callee) among new empty subgraphs 1, 2, ..."""

    def mutate(m: "fb.ModelT") -> None:
        n = max(max(e) for e in edges)
        for _ in range(n):
            sg = fb.SubGraphT()
            sg.tensors, sg.inputs, sg.outputs, sg.operators = [], [], [], []
            m.subgraphs.append(sg)
        m.subgraphs[0].operators.insert(0, _call_once(m, 1))
        for caller, callee in edges:
            m.subgraphs[caller].operators.append(_call_once(m, callee))

    return mutate


def _extra_input(dtype: str):
    def mutate(m: "fb.ModelT") -> None:
        sg = m.subgraphs[0]
        t = fb.TensorT()
        t.name, t.shape, t.type, t.buffer = b"extra", [1, 4], TYPE_CODES[dtype], 0
        sg.tensors.append(t)
        sg.inputs = list(sg.inputs) + [len(sg.tensors) - 1]

    return mutate


def _sparse(m: "fb.ModelT") -> None:
    """The first convolution filter gets (dense) sparsity parameters, as a sparsifying converter writes."""
    sg = m.subgraphs[0]
    t = next(t for t in sg.tensors if m.buffers[t.buffer].data is not None and len(t.shape) == 4)
    sp = fb.SparsityParametersT()
    sp.traversalOrder = list(range(4))
    sp.dimMetadata = []
    for d in t.shape:
        dm = fb.DimensionMetadataT()
        dm.format, dm.denseSize = fb.DimensionType.DENSE, int(d)
        sp.dimMetadata.append(dm)
    t.sparsity = sp


def _offline(offset_of):
    """OfflineMemoryAllocation metadata: ``offset_of(planned arena buffers by tensor)`` -> offsets by tensor."""

    def mutate(m: "fb.ModelT") -> None:
        plan = plan_graph(build_graph(parse_model(model_to_bytes(m))))
        planned = {b.owner: b for b in plan.buffers if b.kind == "tensor" and b.subgraph == 0}
        n = len(m.subgraphs[0].tensors)
        offsets = [-1] * n
        for i, off in offset_of(planned).items():
            offsets[i] = off
        data = struct.pack("<III", 1, 0, n) + struct.pack(f"<{n}i", *offsets)
        buf = fb.BufferT()
        buf.data = np.frombuffer(data, np.uint8).copy()
        m.buffers.append(buf)
        md = fb.MetadataT()
        md.name, md.buffer = b"OfflineMemoryAllocation", len(m.buffers) - 1
        m.metadata = (m.metadata or []) + [md]

    return mutate


def _all_zero(planned) -> dict[int, int]:
    return {i: 0 for i in planned}


def _one_moved(planned) -> dict[int, int]:
    """TFLM's own layout, except one tensor put on top of another that is live at the same time."""
    offsets = {i: b.offset for i, b in planned.items()}
    a, b = next(
        (a, b)
        for a in planned.values()
        for b in planned.values()
        if a.owner < b.owner and a.offset != b.offset and a.first <= b.last and b.first <= a.last
    )
    offsets[b.owner] = a.offset
    return offsets


def _external(m: "fb.ModelT", data_end: int | None = None) -> bytes:
    """The model with every constant buffer stored after the flatbuffer (Buffer.offset/size)."""
    payloads = {}
    for i, b in enumerate(m.buffers):
        if b.data is not None and len(b.data):
            payloads[i] = np.asarray(b.data, np.uint8).tobytes()
            b.data, b.offset, b.size = None, 2, len(payloads[i])  # placeholders of the final width
    head = len(model_to_bytes(m))
    at = (head + 15) // 16 * 16
    blob = bytearray()
    for i, p in payloads.items():
        m.buffers[i].offset = at + len(blob)
        blob += p + b"\0" * (-len(p) % 16)
    fbytes = model_to_bytes(m)
    assert len(fbytes) == head
    return (fbytes + b"\0" * (at - head) + bytes(blob))[:data_end]


BAD_MODELS = {
    # (mutation, commands, message)
    "cycle 1-2-1": (
        _with_calls([(1, 2), (2, 1)]),
        ("analyze", "optimize", "verify"),
        "calls itself",
    ),
    "cycle 1-2-3-1": (
        _with_calls([(1, 2), (2, 3), (3, 1)]),
        ("analyze", "optimize", "verify"),
        "calls itself",
    ),
    "cycle back to 0": (_with_calls([(1, 0)]), ("analyze", "optimize", "verify"), "calls itself"),
    # 65 subgraphs on one chain of calls (was a RecursionError from about 1,000 on)
    "calls nested 65 deep": (
        _with_calls([(i, i + 1) for i in range(1, 64)]),
        ("analyze", "optimize", "verify"),
        "64 levels deep (at most 63)",
    ),
    "complex64 input": (_extra_input("COMPLEX64"), ("optimize", "verify"), "is COMPLEX64"),
    "complex128 input": (_extra_input("COMPLEX128"), ("optimize", "verify"), "is COMPLEX128"),
    "string input": (_extra_input("STRING"), ("optimize", "verify"), "is STRING"),
    "resource input": (_extra_input("RESOURCE"), ("optimize", "verify"), "is RESOURCE"),
    "variant input": (_extra_input("VARIANT"), ("optimize", "verify"), "is VARIANT"),
    "sparse weights": (_sparse, ("optimize", "verify"), "sparse weights"),
    "offline all zero": (
        _offline(_all_zero),
        ("optimize", "verify"),
        "on the same bytes while both are live",
    ),
    "offline one overlap": (
        _offline(_one_moved),
        ("optimize", "verify"),
        "on the same bytes while both are live",
    ),
}


def _command(command: str, model: str) -> list[str]:
    if command == "analyze":
        return ["analyze", model, "--json", "a.json", "--csv", "csv", "--plot", "p.png"]
    if command == "optimize":
        return [
            "optimize",
            model,
            "-o",
            "o.tflite",
            "--report",
            "r.json",
            "--plot",
            "p.png",
            "--runs",
            "1",
        ]
    return ["verify", model, "m.tflite", "--runs", "1"]


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_bad_models_are_one_line_and_exit_2(work: Path, case: str) -> None:
    mutate, commands, message = BAD_MODELS[case]
    _model(work / "bad.tflite", mutate)
    for command in commands:
        _refused(_command(command, "bad.tflite"), work, message)


def test_calls_nested_64_deep_are_planned(work: Path) -> None:
    """The control of the depth case: one level less is a model like any other."""
    _model(work / "deep.tflite", _with_calls([(i, i + 1) for i in range(1, 63)]))
    r = _run(["analyze", "deep.tflite"], work)
    assert r.returncode == 0, r.stderr


def test_a_consistent_offline_layout_is_not_refused(work: Path) -> None:
    """The control of the two offline cases: TFLM's own offsets written as metadata pass."""
    _model(
        work / "laid.tflite", _offline(lambda planned: {i: b.offset for i, b in planned.items()})
    )
    r = _run(["verify", "laid.tflite", "m.tflite", "--runs", "1"], work)
    assert r.returncode == 0, r.stderr


def _spilled_with(mutate) -> tuple["fb.ModelT", "fb.ModelT"]:
    original, spilled = spilled_skip_graphs("INT8")
    m = parse_model(model_to_bytes(spilled.model))
    for op in m.subgraphs[0].operators:
        mutate(opcode_name(m.operatorCodes[op.opcodeIndex]), op)
    return original.model, m


def _spill_inputs(inputs):
    def mutate(name: str, op) -> None:
        if name == "Spill":
            op.inputs = list(inputs)

    return mutate


def _fetching_outputs(name: str, op) -> None:
    if name in ("Fetching", "FetchingConv2D"):
        op.outputs = []


@pytest.mark.parametrize(
    "case,mutate,message",
    [
        ("spill without inputs", _spill_inputs([]), "a Spill reads exactly one tensor"),
        ("spill of -1", _spill_inputs([-1]), "a Spill reads exactly one tensor"),
        ("fetching without outputs", _fetching_outputs, "writes exactly one"),
    ],
)
def test_malformed_tinyseg_operator_wiring(work: Path, case: str, mutate, message: str) -> None:
    original, bad = _spilled_with(mutate)
    _model(work / "orig.tflite", model=original)
    _model(work / "bad.tflite", model=bad)
    _refused(["verify", "orig.tflite", "bad.tflite", "--runs", "1"], work, message)
    _refused(["analyze", "bad.tflite"], work, message)


# ---------------------------------------------------------------- buffers outside the flatbuffer


def test_buffers_outside_the_flatbuffer_are_read_and_written_back(work: Path) -> None:
    (work / "ext.tflite").write_bytes(_external(load_model(TINY_UNET)))
    r = _run(["optimize", "ext.tflite", "-o", "o.tflite", "--runs", "1", "-q", "--no-stream"], work)
    assert r.returncode == 0, r.stderr
    out = load_model(work / "o.tflite")
    assert all(
        b.offset == 0 and b.size == 0 for b in out.buffers
    )  # inside the flatbuffer: TFLM reads only those
    r = _run(["verify", "ext.tflite", "o.tflite", "--runs", "1"], work)
    assert r.returncode == 0, r.stderr
    r = _run(
        ["verify", "m.tflite", "o.tflite", "--runs", "1"], work
    )  # the same function as the inline original
    assert r.returncode == 0, r.stderr


def test_buffers_beyond_one_flatbuffer_are_refused(work: Path, monkeypatch, capfd) -> None:
    """Weights over 2 GB cannot be written back inside a flatbuffer (where TFLM reads them): refused
    up front. In-process, with the limit lowered to this model's weights (a 2 GB file is no test input)."""
    from tinyseg_plugin.cli import main
    from tinyseg_plugin.ir import modelio

    (work / "ext.tflite").write_bytes(_external(load_model(TINY_UNET)))
    weights = sum(
        len(b.data) for b in load_model(work / "ext.tflite").buffers if b.data is not None
    )
    monkeypatch.setattr(modelio, "FLATBUFFER_LIMIT", weights + (64 << 20) - 1)
    before = _snapshot(work)
    assert main(["optimize", str(work / "ext.tflite"), "-o", str(work / "o.tflite")]) == 2
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and "more than one flatbuffer can" in err[0], err
    assert _snapshot(work) == before


def test_a_buffer_past_the_end_of_the_file_is_refused(work: Path) -> None:
    data = _external(load_model(TINY_UNET))
    (work / "cut.tflite").write_bytes(data[: len(data) - 100])
    _refused(_command("optimize", "cut.tflite"), work, "lies past the end of the file")


# ---------------------------------------------------------------- names and paths in messages


def test_a_hostile_tensor_name_is_escaped_and_cut(work: Path) -> None:
    def mutate(m: "fb.ModelT") -> None:
        t = m.subgraphs[0].tensors[m.subgraphs[0].inputs[0]]
        t.name = b"evil\nname\x1b[2J\r" + b"x" * 1_000_000
        t.shape = [1, -1] + [int(d) for d in t.shape[2:]]

    _model(work / "bad.tflite", mutate)
    for command in ("analyze", "optimize"):
        line = _refused(_command(command, "bad.tflite"), work, "evil\\nname\\x1b[2J\\r")
        assert len(line) < 500 and "dynamic shape" in line


def test_a_hostile_path_is_escaped(work: Path) -> None:
    odd = "new\nline\x1b[31m.tflite"
    (work / odd).write_bytes(b"not a model at all, but long enough to be looked at")
    line = _refused(["analyze", odd], work, "new\\nline\\x1b[31m.tflite")
    assert "not a flatbuffer" in line
    _refused(["optimize", "m.tflite", "-o", "no\nsuch/dir/o.tflite"], work, "no\\nsuch/dir")
    _refused(["analyze", "x" * 5000 + "\n.tflite"], work, "...")


def test_a_hostile_custom_operator_name_is_escaped(work: Path) -> None:
    def mutate(m: "fb.ModelT") -> None:
        oc = fb.OperatorCodeT()
        oc.builtinCode = oc.deprecatedBuiltinCode = fb.BuiltinOperator.CUSTOM
        oc.customCode, oc.version = b"Evil\nOp", 1
        m.operatorCodes.append(oc)
        last = m.subgraphs[0].operators[-1]
        last.opcodeIndex = len(m.operatorCodes) - 1
        last.builtinOptionsType, last.builtinOptions, last.customOptions = 0, None, [0, 0, 0]

    _model(work / "bad.tflite", mutate)
    _refused(_command("optimize", "bad.tflite"), work, "Evil\\nOp")


def test_the_table_escapes_names(work: Path) -> None:
    def mutate(m: "fb.ModelT") -> None:
        m.subgraphs[0].tensors[m.subgraphs[0].inputs[0]].name = b"in\nput"

    _model(work / "named.tflite", mutate)
    r = _run(["analyze", "named.tflite"], work)
    assert r.returncode == 0, r.stderr
    assert "in\\nput" in r.stdout and "in\nput" not in r.stdout


def test_shown_is_one_safe_line_of_bounded_length() -> None:
    """Whatever a name holds: no character that could break the line or drive the terminal, and at
    most the limit (the start and the end kept)."""
    import unicodedata

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tinyseg_plugin.errors import shown

    @settings(max_examples=300, deadline=None)
    @given(st.one_of(st.text(), st.binary()), st.integers(0, 300))
    def check(value, limit: int) -> None:
        out = shown(value, limit)
        assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in out)
        if limit:
            assert len(out) <= max(limit, 5)

    check()
    assert shown("a" * 60 + "\n" + "b" * 1_000_000 + "end.tflite").endswith("end.tflite")


# ---------------------------------------------------------------- huge models: bounded time

HANG_GUARD = 120.0  # seconds: catches a hang or a quadratic step, not a speed target (benchmarks/)


def _timed(args: list[str], cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TFLM_DIR", None)
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "tinyseg_plugin.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return r, time.monotonic() - start


def test_a_stream_chain_of_20000_body_tensors_is_analyzed(tmp_path: Path, counts) -> None:
    """20,000 RELU stages fanned out from the input, each writing its own body tensor: the body
    checks and the options' decoding are linear (benchmarks/stream_body_scale.py has the figures)."""
    import hostile_models

    path = tmp_path / "wide.tflite"
    path.write_bytes(hostile_models.long_stream_chain(20000, fan_out=True))
    r, seconds = _timed(["analyze", str(path)], tmp_path, HANG_GUARD)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RELU > RELU" in r.stdout
    counts(f"hostile CLI: a StreamChain of 20,000 body tensors analysed in {seconds:.1f} s")


@pytest.mark.parametrize("command", ["optimize", "verify"])
def test_the_time_limit_bounds_a_20000_operator_chain(tmp_path: Path, command: str, counts) -> None:
    """--time-limit bounds the whole run, not only TFLM's: on a 20,000-operator chain (seconds of
    parsing alone) the command stops within the limit plus 5 s, with the limit's one line, exit 2
    and nothing written."""
    import synth

    from tinyseg_plugin.ir.modelio import save_model

    limit = 5
    path = tmp_path / "chain.tflite"
    save_model(synth.chain(20000), path)
    before = _snapshot(tmp_path)
    args = {
        "optimize": ["optimize", str(path), "-o", "o.tflite", "--report", "r.json"],
        "verify": ["verify", str(path), str(path)],
    }[command]
    r, seconds = _timed([*args, "--time-limit", str(limit)], tmp_path, limit + 30)
    lines = r.stderr.splitlines()
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(
        f"tinyseg: error: stopped after the --time-limit of {limit} s while "
    ), lines
    assert seconds <= limit + 5, seconds
    assert _snapshot(tmp_path) == before
    counts(
        f"hostile CLI: {command} of a 20,000-operator chain, --time-limit {limit}: {seconds:.1f} s"
    )
