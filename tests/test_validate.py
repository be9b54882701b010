"""Malformed and unsupported models: each refused with one line, exit 2, nothing written.

Every case builds the bad input itself and runs the command on it; the TFLM refusals
are also checked against the real interpreter, so the static mirror cannot drift.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import synth
from synth import ModelBuilder

from tinyseg_plugin.checks import interpreter
from tinyseg_plugin.cli import main
from tinyseg_plugin.errors import TinySegError
from tinyseg_plugin.ir.graph import build_graph
from tinyseg_plugin.ir.modelio import model_to_bytes, parse_model, save_model
from tinyseg_plugin.ir.schema import BUILTIN_CODES, fb
from tinyseg_plugin.ir.validate import tflm_refusals

# ---------------------------------------------------------------- models


def _conv_options() -> "fb.Conv2DOptionsT":
    o = fb.Conv2DOptionsT()
    o.padding, o.strideH, o.strideW = synth.SAME, 1, 1
    o.dilationHFactor = o.dilationWFactor = 1
    return o


def hybrid_model() -> "fb.ModelT":
    """Float activations, int8 weights: TFLM's conv Prepare says hybrid models are not supported."""
    b = ModelBuilder(dtype="FLOAT32")
    x = b.input([1, 8, 8, 3])
    w = b._tensor([4, 3, 3, 3], "INT8", "w", np.ones([4, 3, 3, 3], np.int8), [0.01] * 4, [0] * 4, 0)
    bias = b._tensor([4], "FLOAT32", "b", np.zeros(4, np.float32))
    y = b.activation([1, 8, 8, 4], "y")
    b._op("CONV_2D", [x, w, bias], [y], fb.BuiltinOptions.Conv2DOptions, _conv_options())
    return b.build([y])


def float16_model(layers: int = 1) -> "fb.ModelT":
    """Float16 weights behind DEQUANTIZE (a common converter output): TFLM's DEQUANTIZE refuses float16.
    ``layers`` convolutions, each with its own DEQUANTIZE, as the converter writes them."""
    b = ModelBuilder(dtype="FLOAT32")
    y = b.input([1, 8, 8, 3])
    for k in range(layers):
        c = 3 if k == 0 else 4
        w16 = b._tensor([4, 3, 3, c], "FLOAT16", f"w16_{k}", np.ones([4, 3, 3, c], np.float16))
        w = b.activation([4, 3, 3, c], f"w32_{k}")
        b._op("DEQUANTIZE", [w16], [w])
        bias = b._tensor([4], "FLOAT32", f"b{k}", np.zeros(4, np.float32))
        x, y = y, b.activation([1, 8, 8, 4], f"y{k}")
        b._op("CONV_2D", [x, w, bias], [y], fb.BuiltinOptions.Conv2DOptions, _conv_options())
    return b.build([y])


def custom_op_model(code: bytes = b"Convolution2DTransposeBias") -> "fb.ModelT":
    """A Tiny-U-Net-like model whose last convolution is a custom operator TFLM does not ship."""
    m = synth.tiny_unet_like()
    sg = m.subgraphs[0]
    oc = fb.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = fb.BuiltinOperator.CUSTOM
    oc.customCode = code
    oc.version = 1
    m.operatorCodes.append(oc)
    last = sg.operators[-1]
    last.opcodeIndex = len(m.operatorCodes) - 1
    last.builtinOptionsType, last.builtinOptions = 0, None
    last.customOptions = [0, 0, 0]
    return m


def _base() -> "fb.ModelT":
    return synth.random_unet(2)


def _op_named(m, name: str) -> "fb.OperatorT":
    code = BUILTIN_CODES[name]
    return next(
        op for op in m.subgraphs[0].operators if m.operatorCodes[op.opcodeIndex].builtinCode == code
    )


def _with_offline(
    m, offsets: list[int], count: int | None = None, buffer: int | None = None
) -> "fb.ModelT":
    data = struct.pack("<III", 1, 0, len(offsets) if count is None else count) + struct.pack(
        f"<{len(offsets)}i", *offsets
    )
    buf = fb.BufferT()
    buf.data = np.frombuffer(data, np.uint8).copy()
    m.buffers.append(buf)
    md = fb.MetadataT()
    md.name = b"OfflineMemoryAllocation"
    md.buffer = len(m.buffers) - 1 if buffer is None else buffer
    m.metadata = [md]
    return m


def _mutate(kind: str) -> "fb.ModelT":
    m = _base()
    sg = m.subgraphs[0]
    n = len(sg.tensors)
    if kind == "no operators":
        sg.operators = []
    elif kind == "intermediate out of range":
        sg.operators[0].intermediates = [n + 50]
    elif kind == "conv with one input":
        _op_named(m, "CONV_2D").inputs = _op_named(m, "CONV_2D").inputs[:1]
    elif kind == "operator without inputs":
        _op_named(m, "MAX_POOL_2D").inputs = []
    elif kind == "options missing":
        op = _op_named(m, "CONV_2D")
        op.builtinOptionsType, op.builtinOptions = 0, None
    elif kind == "options of the wrong type":
        op = _op_named(m, "CONV_2D")
        op.builtinOptionsType, op.builtinOptions = (
            fb.BuiltinOptions.Pool2DOptions,
            fb.Pool2DOptionsT(),
        )
    elif kind == "use before define":
        sg.operators[0], sg.operators[1] = sg.operators[1], sg.operators[0]
    elif kind == "reads its own output":
        op = sg.operators[1]
        op.inputs = [op.outputs[0]] + list(op.inputs[1:])
    elif kind == "two writers":
        sg.operators[-1].outputs = [sg.operators[0].outputs[0]]
    elif kind == "huge dimension":
        sg.tensors[sg.inputs[0]].shape = [1, 2**31 - 1, 2, 3]
    elif kind == "offline buffer 9999":
        _with_offline(m, [-1] * n, buffer=9999)
    elif kind == "offline negative offset":
        _with_offline(m, [-5] + [-1] * (n - 1))
    elif kind == "offline wrong length":
        _with_offline(m, [-1] * (n - 1), count=n)
    elif kind == "weights shorter than tensor":
        w = _op_named(m, "CONV_2D").inputs[1]
        buf = m.buffers[sg.tensors[w].buffer]
        buf.data = buf.data[: len(buf.data) // 2]
    elif kind == "output never written":
        t = fb.TensorT()
        t.shape, t.type, t.buffer, t.name = [1, 4], fb.TensorType.INT8, 0, b"orphan"
        sg.tensors.append(t)
        sg.outputs = list(sg.outputs) + [n]
    elif kind == "control flow names a missing subgraph":
        oc = fb.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode = BUILTIN_CODES["CALL_ONCE"], 127
        oc.version = 1
        m.operatorCodes.append(oc)
        op = fb.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = len(m.operatorCodes) - 1, [], []
        op.builtinOptionsType, op.builtinOptions = (
            fb.BuiltinOptions.CallOnceOptions,
            fb.CallOnceOptionsT(),
        )
        op.builtinOptions.initSubgraphIndex = 7
        sg.operators.insert(0, op)
    else:
        raise AssertionError(kind)
    return m


MALFORMED = {
    "no operators": "no operators",
    "intermediate out of range": "intermediate tensor",
    "conv with one input": "needs at least 2",
    "operator without inputs": "needs at least 1",
    "options missing": "has no Conv2DOptions",
    "options of the wrong type": "Pool2DOptions, expected Conv2DOptions",
    "use before define": "before it is defined",
    "reads its own output": "reads its own output",
    "two writers": "already writes",
    "huge dimension": "more elements than TFLM's int can count",
    "offline buffer 9999": "names buffer 9999",
    "offline negative offset": "offset -5",
    "offline wrong length": "bytes long",
    "weights shorter than tensor": "truncated weights",
    "output never written": "never written",
    "control flow names a missing subgraph": "not another subgraph",
}


def _cli(capfd, args: list[str]) -> tuple[int, list[str], str]:
    rc = main(args)
    out, err = capfd.readouterr()
    return rc, err.strip().splitlines(), out


def _assert_refused(rc: int, lines: list[str], message: str, out_dir: Path) -> None:
    assert rc == 2, lines
    assert len(lines) == 1 and lines[0].startswith("tinyseg: error:"), lines
    assert message in lines[0], lines
    assert not any(out_dir.iterdir()), list(out_dir.iterdir())


# ---------------------------------------------------------------- malformed models


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_model_refused_by_every_command(tmp_path: Path, capfd, kind: str) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(model_to_bytes(_mutate(kind)))
    good = tmp_path / "good.tflite"
    save_model(_base(), good)
    out = tmp_path / "out"
    out.mkdir()
    for args in (
        [
            "analyze",
            str(bad),
            "--json",
            str(out / "a.json"),
            "--csv",
            str(out / "csv"),
            "--plot",
            str(out / "p.png"),
        ],
        ["optimize", str(bad), "-o", str(out / "o.tflite"), "--report", str(out / "r.json"), "-q"],
        ["verify", str(good), str(bad)],
        ["verify", str(bad), str(good)],
    ):
        rc, lines, _ = _cli(capfd, args)
        _assert_refused(rc, lines, MALFORMED[kind], out)


def test_parse_model_refuses_each_malformed_model() -> None:
    for kind, message in MALFORMED.items():
        with pytest.raises(TinySegError, match=message.replace("(", r"\(")):
            parse_model(model_to_bytes(_mutate(kind)), kind)


def test_mutations_are_the_only_defect() -> None:
    """The base model passes validation and TFLM loads it: each case above fails for its own reason."""
    data = model_to_bytes(_base())
    parse_model(data)
    interpreter.check_loads(data)


def test_special_files_are_refused_without_hanging(tmp_path: Path, capfd) -> None:
    fifo = tmp_path / "fifo.tflite"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    for path in ("/dev/zero", str(fifo)):
        for args in (
            ["analyze", path],
            ["optimize", path, "-o", str(out / "o.tflite")],
            ["verify", path, path],
        ):
            rc, lines, _ = _cli(capfd, args)
            _assert_refused(rc, lines, "not a regular file", out)


# ---------------------------------------------------------------- models TFLM refuses (point 4, 5)


@pytest.mark.parametrize(
    "build, reason, tflm_says",
    [
        (hybrid_model, "such hybrid models", "Hybrid models are not supported"),
        (float16_model, "without float16 weights", "dequantize"),
    ],
)
def test_analyze_is_not_exact_where_tflm_refuses(
    tmp_path: Path, capfd, build, reason: str, tflm_says: str
) -> None:
    m = build()
    data = model_to_bytes(m)
    with pytest.raises(TinySegError, match=tflm_says):  # the real interpreter refuses it in Prepare
        interpreter.check_loads(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    rc, _, out = _cli(capfd, ["analyze", str(path), "--json"])
    d = json.loads(out)
    assert rc == 0 and d["exact"] is False
    assert any(reason in r for r in d["not_exact_because"]), d["not_exact_because"]
    rc, _, out = _cli(capfd, ["analyze", str(path)])
    assert "exact: false" in out and reason in out and "NOT exact" in out


def test_a_refusal_repeated_per_layer_is_one_sentence(tmp_path: Path, capfd) -> None:
    """Float16 weights give one refused DEQUANTIZE per layer: analyze says it once and names the
    other operators, rather than one identical sentence per layer."""
    path = tmp_path / "f16.tflite"
    save_model(float16_model(layers=12), path)
    d = _analyze_json(capfd, path)
    assert d["exact"] is False and len(d["not_exact_because"]) == 1, d["not_exact_because"]
    why = d["not_exact_because"][0]
    assert why.startswith("TFLM refuses the model: operator 0 'DEQUANTIZE' turns FLOAT16"), why
    assert why.endswith("(so do 11 more operators: 2, 4, 6, 8, 10, 12, 14, 16, ...)"), why
    rc, _, out = _cli(capfd, ["analyze", str(path)])
    assert rc == 0 and out.count("turns FLOAT16 into FLOAT32") == 1, out


def test_static_refusals_agree_with_the_interpreter() -> None:
    """Where tflm_refusals finds nothing TFLM loads the model; where it finds something TFLM refuses it."""
    cases = [
        hybrid_model(),
        float16_model(),
        custom_op_model(),
        custom_op_model(b"ethos-u"),
        gather_model("FLOAT32", "INT64"),
        gather_model("INT8", "INT32"),
        tile_model(),
        infinite_scale_model(),
        synth.tiny_unet_like(),
        synth.random_unet(3, "FLOAT32"),
        synth.random_unet(4, "INT8"),
    ]
    for m in cases:
        data = model_to_bytes(m)
        refused = bool(tflm_refusals(build_graph(m)))
        try:
            interpreter.check_loads(data)
            loads = True
        except TinySegError:
            loads = False
        assert loads != refused, (tflm_refusals(build_graph(m)),)


def test_optimize_refuses_before_searching(tmp_path: Path, capfd, monkeypatch) -> None:
    import tinyseg_plugin.transforms.optimizer as optimizer

    def no_search(*a, **k):
        raise AssertionError("the search ran on a model TFLM refuses")

    monkeypatch.setattr(optimizer, "search_plans", no_search)
    out = tmp_path / "out"
    out.mkdir()
    for build, message in ((hybrid_model, "hybrid"), (float16_model, "float16")):
        path = tmp_path / "m.tflite"
        save_model(build(), path)
        for extra in ([], ["--unverified"]):  # TFLM refuses it outright: --unverified does not help
            rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite"), *extra])
            _assert_refused(rc, lines, message, out)
            assert "TFLM refuses" in lines[0]


def test_optimize_refuses_a_model_tflm_cannot_load_before_searching(
    tmp_path: Path, capfd, monkeypatch
) -> None:
    """A refusal the static mirror does not know (here: a SOFTMAX on int32) still stops optimize first."""
    import tinyseg_plugin.transforms.optimizer as optimizer

    monkeypatch.setattr(
        optimizer, "search_plans", lambda *a, **k: (_ for _ in ()).throw(AssertionError("searched"))
    )
    b = ModelBuilder(dtype="FLOAT32")
    x = b._tensor([1, 16], "INT32", "x")
    b.inputs.append(x)
    y = b._tensor([1, 16], "INT32", "y")
    b._op("SOFTMAX", [x], [y], fb.BuiltinOptions.SoftmaxOptions, fb.SoftmaxOptionsT())
    path = tmp_path / "m.tflite"
    save_model(b.build([y]), path)
    out = tmp_path / "out"
    out.mkdir()
    rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
    _assert_refused(rc, lines, "TFLM cannot load the model", out)
    assert "nothing to optimize" in lines[0]


# ---------------------------------------------------------------- custom operators (point 6)


def test_custom_operator_blocks_verification_and_unverified_mode_says_so(
    tmp_path: Path, capfd
) -> None:
    path = tmp_path / "custom.tflite"
    save_model(custom_op_model(), path)
    out = tmp_path / "out"
    out.mkdir()
    rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite"), "-q"])
    _assert_refused(
        rc, lines, "'Convolution2DTransposeBias' is a custom operator TFLM does not ship", out
    )
    assert "--unverified" in lines[0]
    rc, _, text = _cli(
        capfd,
        [
            "optimize",
            str(path),
            "-o",
            str(out / "o.tflite"),
            "--report",
            str(out / "r.json"),
            "-q",
            "--unverified",
        ],
    )
    assert rc == 0
    assert "UNVERIFIED" in text
    rep = json.loads((out / "r.json").read_text())
    assert rep["verified"] is None and rep["verification"].startswith("UNVERIFIED")
    assert rep["optimized"]["head"] < rep["original"]["head"]
    rc, _, out_json = _cli(capfd, ["analyze", str(path), "--json"])
    d = json.loads(out_json)
    assert not d["exact"] and any("Convolution2DTransposeBias" in r for r in d["not_exact_because"])
    rc, lines, _ = _cli(capfd, ["verify", str(path), str(out / "o.tflite")])
    assert rc == 2 and len(lines) == 1 and "Convolution2DTransposeBias" in lines[0]


# ---------------------------------------------------------------- TFLM in a child process (point 9)


def test_a_tflm_crash_is_a_clean_error() -> None:
    """OfflineMemoryAllocation naming buffer 9999 makes TFLM itself segfault: the child dies, not the tool."""
    data = model_to_bytes(_mutate("offline buffer 9999"))
    with pytest.raises(TinySegError, match=r"TFLM crashed \(SIGSEGV\) while loading the model"):
        interpreter.check_loads(data)


def test_a_slow_tflm_run_is_stopped_and_said(tmp_path: Path, capfd) -> None:
    """The time limit bounds every TFLM run (a float LSTM under WHILE runs for minutes in TFLM)."""
    data = model_to_bytes(synth.tiny_unet_like())
    with pytest.raises(TinySegError, match="did not finish .* within 0.01 s"):
        interpreter.run_many(data, [[np.zeros((1, 80, 120, 3), np.int8)]], seconds=0.01)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    rc, lines, _ = _cli(capfd, ["verify", str(path), str(path), "--time-limit", "0.01"])
    _assert_refused(rc, lines, "--time-limit", out)


def test_an_uncalled_second_subgraph_is_not_claimed_exact(tmp_path: Path, capfd) -> None:
    """TFLM prepares every subgraph; one holding a TRANSPOSE_CONV that nothing calls crashes it (SIGSEGV).
    analyze must not claim exactness; optimize and verify refuse with one line."""
    import copy

    m = synth.tiny_unet_like()
    m.subgraphs.append(copy.deepcopy(m.subgraphs[0]))
    data = model_to_bytes(m)
    with pytest.raises(TinySegError, match="SIGSEGV"):
        interpreter.check_loads(data)
    path = tmp_path / "two.tflite"
    path.write_bytes(data)
    rc, _, out = _cli(capfd, ["analyze", str(path), "--json"])
    d = json.loads(out)
    assert rc == 0 and not d["exact"] and any("subgraph 1" in r for r in d["not_exact_because"])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for args in (
        ["optimize", str(path), "-o", str(out_dir / "o.tflite")],
        ["verify", str(path), str(path)],
    ):
        rc, lines, _ = _cli(capfd, args)
        _assert_refused(rc, lines, "TFLM crashed (SIGSEGV)", out_dir)


def test_a_tensor_nothing_writes_is_planned_as_tflm_plans_it() -> None:
    """Vela's Ethos-U scratch tensors are read by an operator and written by none: TFLM plans them
    from their first reader on, so validation must accept them (only a read before a later write is
    out of order), and the planner must agree with the interpreter."""
    import copy

    from tinyseg_plugin.memory.planner import plan_graph

    m = _base()
    sg = m.subgraphs[0]
    cat = _op_named(m, "CONCATENATION")
    fresh = copy.deepcopy(sg.tensors[cat.inputs[1]])
    fresh.name = b"scratch_nobody_writes"
    fresh.buffer = 0
    sg.tensors.append(fresh)
    cat.inputs = [cat.inputs[0], len(sg.tensors) - 1] + list(cat.inputs[2:])
    data = model_to_bytes(m)
    graph = build_graph(parse_model(data))
    assert plan_graph(graph).head == interpreter.arena_usage(data).head


def test_the_time_limit_counts_cpu_not_wall_clock() -> None:
    """A child that waits longer than its limit is not stopped; one that computes past it is (SIGPROF):
    on a busy machine a slow model is judged by its own work, not by the load of others."""
    code = (
        "import sys, time; from tinyseg_plugin.checks.interpreter import cpu_limit; cpu_limit(0.2); time.sleep(1.0); "
        "print('waited', flush=True); sum(range(10**12))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(Path(__file__).resolve().parent.parent),
    )
    assert p.stdout.strip() == "waited"
    assert interpreter.stopped_by_cpu_limit(p.returncode), p.returncode


# ---------------------------------------------------------------- refusals the corpus and users met


def gather_nd_model(values: str = "FLOAT32", indices: str = "INT64") -> "fb.ModelT":
    """A GATHER_ND of two rows with constant indices of the given type."""
    b = ModelBuilder(dtype="FLOAT32")
    q = {"scales": [0.1], "zps": [0]} if values in ("INT8", "INT16") else {}
    x = b._tensor([4, 3], values, "x", **q)
    b.inputs.append(x)
    kind = {"INT32": np.int32, "INT64": np.int64, "INT16": np.int16}[indices]
    p = b._tensor([2, 1], indices, "indices", np.array([[0], [2]], kind))
    y = b._tensor([2, 3], values, "y", **q)
    b._op("GATHER_ND", [x, p], [y])
    return b.build([y])


def gather_model(values: str = "FLOAT32", positions: str = "INT64") -> "fb.ModelT":
    """A GATHER along axis 1 with constant positions of the given type (converters write INT64 ones)."""
    b = ModelBuilder(dtype="FLOAT32")
    q = {"scales": [0.1], "zps": [0]} if values in ("INT8", "INT16") else {}
    x = b._tensor([1, 6, 4], values, "x", **q)
    b.inputs.append(x)
    kind = {"INT32": np.int32, "INT64": np.int64, "INT16": np.int16}[positions]
    p = b._tensor([3], positions, "positions", np.array([0, 2, 5], kind))
    y = b._tensor([1, 3, 4], values, "y", **q)
    o = fb.GatherOptionsT()
    o.axis, o.batchDims = 1, 0
    b._op("GATHER", [x, p], [y], fb.BuiltinOptions.GatherOptions, o)
    return b.build([y])


def tile_model() -> "fb.ModelT":
    """What Keras UpSampling2D converts to: a TILE (by [1, 2, 2, 1] here), which TFLM lacks."""
    b = ModelBuilder(dtype="FLOAT32")
    x = b.input([1, 4, 4, 2])
    m = b._tensor([4], "INT32", "multiples", np.array([1, 2, 2, 1], np.int32))
    y = b.activation([1, 8, 8, 2], "y")
    b._op("TILE", [x, m], [y])
    return b.build([y])


def infinite_scale_model() -> "fb.ModelT":
    """An int8 convolution whose channel 1 has all-zero weights under an infinite scale (and so
    does its bias), as a converter writes for an all-zero channel."""
    b = ModelBuilder(dtype="INT8")
    x = b.input([1, 8, 8, 3])
    w = np.random.default_rng(0).integers(-127, 128, size=[4, 3, 3, 3]).astype(np.int8)
    w[1] = 0
    scales = [0.01, float("inf"), 0.01, 0.01]
    wt = b._tensor([4, 3, 3, 3], "INT8", "w", w, scales, [0] * 4, 0)
    bias = b._tensor(
        [4], "INT32", "b", np.zeros(4, np.int32), [b.act_scale * s for s in scales], [0] * 4
    )
    y = b.activation([1, 8, 8, 4], "y")
    b._op("CONV_2D", [x, wt, bias], [y], fb.BuiltinOptions.Conv2DOptions, _conv_options())
    return b.build([y])


def cast_model(source: str, target: str) -> "fb.ModelT":
    """A lone CAST (MoveNet's first operator casts its UINT8 input to FLOAT32)."""
    b = ModelBuilder(dtype="FLOAT32")
    x = b._tensor([1, 4, 4, 3], source, "x")
    b.inputs.append(x)
    y = b._tensor([1, 4, 4, 3], target, "y")
    b._op("CAST", [x], [y])
    return b.build([y])


def _wheel_refusal(m: "fb.ModelT", invoke: bool = False) -> str | None:
    """What the real interpreter says when it refuses the model in load + AllocateTensors (with
    ``invoke``: or in one invoke on zeros), or None."""
    try:
        interpreter.check_loads(model_to_bytes(m))
        if invoke:
            interpreter.arena_usage(model_to_bytes(m))
    except TinySegError as exc:
        return str(exc)
    return None


def _analyze_json(capfd, path: Path) -> dict:
    rc, lines, out = _cli(capfd, ["analyze", str(path), "--json"])
    assert rc == 0 and not lines, lines
    return json.loads(out)


@pytest.mark.parametrize(
    "op, values, positions, reason, tflm_says",
    [
        ("GATHER", "FLOAT32", "INT64", "has INT64 positions", "Positions of type 'INT64'"),
        ("GATHER", "INT8", "INT16", "has INT16 positions", "Positions of type 'INT16'"),
        ("GATHER", "INT16", "INT32", "gathers INT16 values", "Type 'INT16' is not supported"),
        ("GATHER", "FLOAT32", "INT32", None, None),
        ("GATHER", "INT8", "INT32", None, None),
        ("GATHER_ND", "FLOAT32", "INT64", "has INT64 indices", "Indices of type 'INT64'"),
        ("GATHER_ND", "INT32", "INT32", "gathers INT32 values", "Params of type 'INT32'"),
        ("GATHER_ND", "INT8", "INT32", None, None),
    ],
)
def test_gather_verdict_matches_the_wheel(
    tmp_path: Path, capfd, op: str, values: str, positions: str, reason, tflm_says
) -> None:
    """analyze claims exact only where the wheel's GATHER (GATHER_ND) Prepare accepts the types."""
    m = (gather_model if op == "GATHER" else gather_nd_model)(values, positions)
    said = _wheel_refusal(m)
    assert (said is None) == (tflm_says is None), said
    if tflm_says:
        assert tflm_says in said
    path = tmp_path / "gather.tflite"
    save_model(m, path)
    d = _analyze_json(capfd, path)
    assert d["exact"] is (reason is None), d["not_exact_because"]
    if reason:
        why = d["not_exact_because"][0]
        assert why.startswith(f"TFLM refuses the model: operator 0 '{op}' {reason}"), why
        out = tmp_path / "out"
        out.mkdir()
        rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
        _assert_refused(rc, lines, f"operator 0 '{op}' {reason}", out)
        assert "TFLM refuses the model in Prepare" in lines[0]


def test_tile_names_the_resizing_remedy(tmp_path: Path, capfd) -> None:
    m = tile_model()
    said = _wheel_refusal(m)
    assert said and "operator 0 'TILE' is a builtin operator the tflite-micro wheel" in said, said
    path = tmp_path / "tile.tflite"
    save_model(m, path)
    d = _analyze_json(capfd, path)
    assert d["exact"] is False
    assert d["not_exact_because"][0].startswith(
        "TFLM refuses the model: operator 0 'TILE' is a builtin operator TFLM has no kernel for; "
        "Keras UpSampling2D converts to TILE: use layers.Resizing("
    ), d["not_exact_because"]
    out = tmp_path / "out"
    out.mkdir()
    rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
    _assert_refused(
        rc, lines, "operator 0 'TILE' is a builtin operator TFLM has no kernel for", out
    )
    assert 'interpolation="nearest"' in lines[0] and "--unverified" in lines[0]
    assert " is TFLM " not in lines[0]


def test_vela_operator_is_not_registered_in_the_wheel(tmp_path: Path, capfd) -> None:
    """A model Vela compiled: the wheel has no ethos-u kernel, so analyze is not exact and optimize
    refuses it (even --unverified) with the Vela remedy, before the layout checks."""
    m = custom_op_model(b"ethos-u")
    k = len(m.subgraphs[0].operators) - 1
    said = _wheel_refusal(m)
    assert said and f"operator {k} 'ethos-u' is a custom operator the tflite-micro wheel" in said
    path = tmp_path / "vela.tflite"
    save_model(m, path)
    d = _analyze_json(capfd, path)
    assert d["exact"] is False
    assert (
        f"operator {k} 'ethos-u' is the Ethos-U operator Vela writes, which is not registered "
        in (d["not_exact_because"][0])
    )
    out = tmp_path / "out"
    out.mkdir()
    for extra in ([], ["--unverified"]):
        rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite"), *extra])
        _assert_refused(rc, lines, "not registered in the tflite-micro wheel", out)
        assert "from before Vela compiled it" in lines[0]


def test_wheel_refusal_names_the_unregistered_operator(tmp_path: Path, capfd, monkeypatch) -> None:
    """Where the static mirror misses a missing kernel, the real load's message still names the
    operator: TFLM's log says only "Failed to get registration from op code CUSTOM"."""
    import tinyseg_plugin.ir.validate as validate

    monkeypatch.setattr(validate, "tflm_refusals", lambda graph: [])
    out = tmp_path / "out"
    out.mkdir()
    for m, named in (
        (custom_op_model(b"ethos-u"), "'ethos-u' is a custom operator"),
        (tile_model(), "operator 0 'TILE' is a builtin operator"),
    ):
        path = tmp_path / "m.tflite"
        save_model(m, path)
        rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
        _assert_refused(rc, lines, named, out)
        assert "the tflite-micro wheel does not register; nothing to optimize" in lines[0]


def test_infinite_scale_over_zero_weights(tmp_path: Path, capfd) -> None:
    """TFLM runs it (the channel's output is its zero point), so analyze plans it; optimize refuses
    it in one sentence, since TFLM's multiplier from an infinite scale is undefined off the host."""
    m = infinite_scale_model()
    data = model_to_bytes(m)
    x = np.random.default_rng(1).integers(-128, 128, size=[1, 8, 8, 3]).astype(np.int8)
    y = interpreter.run(data, [x])[0]
    assert (y[..., 1] == -3).all() and not (y[..., 0] == -3).all()  # the wheel runs it
    path = tmp_path / "inf.tflite"
    path.write_bytes(data)
    assert _analyze_json(capfd, path)["exact"] is True
    out = tmp_path / "out"
    out.mkdir()
    rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
    _assert_refused(rc, lines, "tensor 1 'w' has an infinite or NaN quantization scale", out)
    rc, lines, _ = _cli(capfd, ["verify", str(path), str(path)])
    _assert_refused(rc, lines, "cannot be verified: subgraph 0 tensor 1 'w' has an infinite", out)
    # the same scale over weights that are not all zero is still malformed
    m.buffers[m.subgraphs[0].tensors[1].buffer].data[:] = 1
    save_model(m, path)
    rc, lines, _ = _cli(capfd, ["analyze", str(path)])
    _assert_refused(rc, lines, "non-finite quantization scale over values that are not all", out)


@pytest.mark.parametrize(
    "source, target, refused",
    [
        ("UINT8", "FLOAT32", "Input type UINT8"),
        ("FLOAT32", "INT64", "Output type INT64"),
        ("INT8", "FLOAT32", None),
        ("BOOL", "INT32", None),
    ],
)
def test_cast_verdict_matches_the_wheel(
    tmp_path: Path, capfd, source: str, target: str, refused
) -> None:
    """TFLM's CAST takes every type in Prepare and fails in Eval: analyze is not exact there, and
    optimize refuses it up front rather than after its search."""
    m = cast_model(source, target)
    assert _wheel_refusal(m) is None  # the load alone never tells
    said = _wheel_refusal(m, invoke=True)
    assert (said is None) == (refused is None), said
    if refused:
        assert refused in said
    path = tmp_path / "cast.tflite"
    save_model(m, path)
    d = _analyze_json(capfd, path)
    assert d["exact"] is (refused is None), d["not_exact_because"]
    if refused:
        assert d["not_exact_because"][0].startswith(
            f"TFLM refuses the model: operator 0 'CAST' casts {source} to {target}, but TFLM's CAST"
        )
        out = tmp_path / "out"
        out.mkdir()
        rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
        _assert_refused(rc, lines, "TFLM refuses the model when it runs: operator 0 'CAST'", out)
        assert "inference_input_type" in lines[0]


def int16_unary_model(op: str, dtype: str = "INT16") -> "fb.ModelT":
    """QUANTIZE int8 -> ``dtype``, a CONV_2D, then ``op`` (HARD_SWISH, ELU, or RESIZE_BILINEAR to
    twice the size) on ``dtype`` rows, then QUANTIZE back to int8."""
    b = ModelBuilder(dtype="INT8")
    x8 = b.input([1, 8, 6, 3])
    b.dtype = dtype
    x = b.activation([1, 8, 6, 3], "x")
    b._op("QUANTIZE", [x8], [x])
    a = b.conv(x, 4)
    if op == "RESIZE_BILINEAR":
        size = b._tensor([2], "INT32", "size", np.array([16, 12], dtype=np.int32))
        y = b.activation([1, 16, 12, 4], "y")
        o = fb.ResizeBilinearOptionsT()
        b._op(op, [a, size], [y], fb.BuiltinOptions.ResizeBilinearOptions, o)
    else:
        y = b.activation([1, 8, 6, 4], "y")
        b._op(op, [a], [y])
    b.dtype = "INT8"
    q = b.activation(list(b.shapes[y]), "q")
    b._op("QUANTIZE", [y], [q])
    return b.build([q])


@pytest.mark.parametrize("op", ["HARD_SWISH", "ELU", "RESIZE_BILINEAR"])
def test_int16_operators_tflm_has_no_kernel_for_are_refused(tmp_path: Path, capfd, op: str) -> None:
    """TFLM computes HARD_SWISH, ELU and RESIZE_BILINEAR on float32 and int8 only: on int16 rows
    the wheel loads the model and fails on its first invoke. analyze says so (not exact, the
    operator and the type named), optimize refuses it in one sentence with exit code 2; the int8
    twin runs and is not refused."""
    m = int16_unary_model(op)
    assert _wheel_refusal(m) is None
    assert _wheel_refusal(m, invoke=True) is not None
    assert _wheel_refusal(int16_unary_model(op, "INT8"), invoke=True) is None
    assert not tflm_refusals(build_graph(int16_unary_model(op, "INT8")))
    path = tmp_path / "m.tflite"
    save_model(m, path)
    d = _analyze_json(capfd, path)
    assert d["exact"] is False
    assert d["not_exact_because"][0].startswith(
        f"TFLM refuses the model: operator 2 '{op}' runs on INT16, but TFLM's {op} computes only"
    )
    out = tmp_path / "out"
    out.mkdir()
    rc, lines, _ = _cli(capfd, ["optimize", str(path), "-o", str(out / "o.tflite")])
    _assert_refused(
        rc, lines, f"TFLM refuses the model when it runs: operator 2 '{op}' runs on INT16", out
    )


def test_tflm_reason_falls_back_to_the_custom_operators_it_cannot_tell_apart() -> None:
    """Should the wheel lack a custom operator TFLM_CUSTOM lists, the sentence names the candidates
    (the log is the wheel's own line for a missing custom kernel; the model is fed in directly)."""
    log = "Failed to get registration from op code CUSTOM\n \n"
    exc = RuntimeError("TFLM failed to allocate tensors")
    data = model_to_bytes(custom_op_model(b"SignalDelay"))
    assert interpreter._tflm_reason(exc, log, data) == (
        "one of the custom operators 'SignalDelay' is not registered in the tflite-micro wheel"
    )
    assert interpreter._tflm_reason(exc, log) == "Failed to get registration from op code CUSTOM"
