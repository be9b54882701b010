"""The real TFLM interpreter (the ``tflite-micro`` wheel) as ground truth, run in a child process.

TFLM is C++: a malformed model can crash it (SIGSEGV, SIGABRT) or make it loop for
minutes (a float LSTM under WHILE). Every call here therefore runs the interpreter in
a fresh child Python with a limit on its CPU time (``cpu_limit``), so a crash or a hang
becomes one clean ``TinySegError`` naming the cause, and TFLM's own log lines (it prints to stderr on
the host) are captured instead of reaching the user's terminal.

Memory figures come from ``print_allocations()``, which prints from C++ straight to
file descriptor 1; the child captures it at the descriptor level. Outputs come from
``invoke()`` with the reference kernels.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import deadline
from ..errors import TinySegError

DEFAULT_ARENA = 64 << 20
LOAD_SECONDS = 30.0  # loading (AllocateTensors: every kernel's Prepare) of any sane model
RUN_SECONDS = 120.0  # default bound of one batch of invokes (verification)
DEADLINE_GRACE = 1.0  # seconds a child may take past the run's deadline before it is killed


def cpu_limit(seconds: float) -> None:
    """Let this process be killed (SIGPROF) after ``seconds`` more of CPU time.

    CPU time, not wall-clock: a slow model on a busy machine is not refused for the load of
    others, and the bound means the same on every machine. Interval timers survive exec, so a
    ``preexec_fn`` can put it on a native runner too."""
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_PROF, seconds)


def backstop_seconds(cpu_seconds: float) -> float:
    """Wall-clock bound of a child whose CPU time ``cpu_limit`` bounds: only a child that waits
    without computing reaches it, so it is generous."""
    return 60.0 + 10.0 * cpu_seconds


def bounds(cpu_seconds: float) -> tuple[float, float]:
    """The CPU limit and the wall-clock timeout of a child asked to run ``cpu_seconds``, cut to
    what is left of the run's --time-limit (deadline.py): a child never outlives the run."""
    cpu = deadline.remaining(cpu_seconds)
    return cpu, deadline.remaining(backstop_seconds(cpu) - DEADLINE_GRACE) + DEADLINE_GRACE


def stopped_by_cpu_limit(returncode: int) -> bool:
    """Whether a child ended because ``cpu_limit`` ran out."""
    return returncode == -signal.SIGPROF


@dataclass(frozen=True)
class ArenaUsage:
    head: int
    tail: int
    total: int


# ---------------------------------------------------------------- the parent side


def _child(request: dict, seconds: float, what: str) -> dict:
    """Run one request in a child interpreter; a crash, a hang or a TFLM error is a TinySegError."""
    pkg_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    cmd = [
        sys.executable,
        "-c",
        "from tinyseg_plugin.checks.interpreter import _child_main; _child_main()",
    ]
    deadline.check(what)
    seconds, timeout = bounds(seconds)
    try:
        proc = subprocess.run(
            cmd,
            input=pickle.dumps(dict(request, seconds=seconds), protocol=pickle.HIGHEST_PROTOCOL),
            capture_output=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        deadline.check(what)  # the run's --time-limit, not the child, ran out
        raise TinySegError(
            f"TFLM did not finish {what} within {timeout:g} s of wall-clock time "
            f"while hardly computing (stopped; is the machine suspended or swapping?)"
        ) from None
    except OSError as exc:
        raise TinySegError(f"cannot start the TFLM child process: {exc.strerror}") from None
    if stopped_by_cpu_limit(proc.returncode):
        deadline.check(what)
        raise TinySegError(
            f"TFLM did not finish {what} within {seconds:g} s of CPU (stopped; raise the limit with "
            f"--time-limit if the model is just slow)"
        )
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        raise TinySegError(
            f"TFLM crashed ({name}) while {what}; the model is malformed or unsupported"
        )
    try:
        reply = pickle.loads(proc.stdout)
    except Exception:
        last = proc.stderr.decode(errors="replace").strip().splitlines()
        raise TinySegError(
            f"TFLM child process failed while {what} (exit {proc.returncode}"
            f"{': ' + last[-1][:160] if last else ''})"
        ) from None
    if "error" in reply:
        raise TinySegError(reply["error"])
    return reply


def check_loads(
    model: bytes, arena_size: int = DEFAULT_ARENA, seconds: float = LOAD_SECONDS
) -> None:
    """Raise a TinySegError with TFLM's reason if the interpreter refuses the model in Prepare."""
    _child({"kind": "load", "model": model, "arena": arena_size}, seconds, "loading the model")


def arena_usage(
    model: bytes, arena_size: int = DEFAULT_ARENA, seconds: float = RUN_SECONDS
) -> ArenaUsage:
    """Head, tail and total as the recording allocator reports them after one invoke on zeros."""
    r = _child(
        {"kind": "usage", "model": model, "arena": arena_size}, seconds, "measuring the arena"
    )
    return ArenaUsage(r["head"], r["tail"], r["total"])


def run_many(
    model: bytes,
    batches: list[list[np.ndarray]],
    arena_size: int = DEFAULT_ARENA,
    seconds: float = RUN_SECONDS,
) -> list[list[np.ndarray]]:
    """Outputs of one invoke per input list, all in one child (one interpreter load)."""
    r = _child(
        {"kind": "run", "model": model, "arena": arena_size, "batches": batches},
        seconds,
        f"running the model on {len(batches)} input(s)",
    )
    return r["outputs"]


def run(
    model: bytes,
    inputs: list[np.ndarray],
    arena_size: int = DEFAULT_ARENA,
    seconds: float = RUN_SECONDS,
) -> list[np.ndarray]:
    """Outputs of one invoke of the model on the given inputs."""
    return run_many(model, [inputs], arena_size, seconds)[0]


def input_details(model: bytes, seconds: float = LOAD_SECONDS) -> list[dict]:
    """Shape and dtype of each graph input, as the interpreter sees them (also proves the model loads)."""
    return _child(
        {"kind": "load", "model": model, "arena": DEFAULT_ARENA}, seconds, "loading the model"
    )["inputs"]


def compare_inputs(
    models: list[bytes],
    labels: list[str] | None = None,
    arena_size: int = DEFAULT_ARENA,
    seconds: float = LOAD_SECONDS,
) -> list[list[dict]]:
    """input_details of several models, loaded one after the other in one child."""
    r = _child(
        {"kind": "load", "models": models, "labels": labels, "arena": arena_size},
        seconds,
        "loading the models",
    )
    return r["each"]


def run_models(
    models: list[bytes],
    batches: list[list[np.ndarray]],
    labels: list[str] | None = None,
    arena_size: int = DEFAULT_ARENA,
    seconds: float = RUN_SECONDS,
) -> list[list[list[np.ndarray]]]:
    """run_many for several models on the same inputs, in one child bounded by ``seconds`` in all."""
    r = _child(
        {
            "kind": "run",
            "models": models,
            "labels": labels,
            "arena": arena_size,
            "batches": batches,
        },
        seconds,
        f"running {len(models)} models on {len(batches)} input(s)",
    )
    return r["each"]


# ---------------------------------------------------------------- the child side


def _tflm_reason(exc: BaseException, log: str, model: bytes | None = None) -> str:
    """The most telling line of what TFLM printed, else the exception's last line. An operator the
    wheel has no kernel for is named by its index and name (TFLM's log names only its opcode, and
    for every custom operator just "CUSTOM")."""
    import re

    skip = (
        "Failed to",
        "Node ",
        "Invoke() failed",
        "AllocateTensors",
        "Didn't find op for builtin opcode",
    )
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        m = re.match(r"Didn't find op for builtin opcode '(\w+)'", ln) or re.match(
            r"Failed to get registration from op code (\w+)", ln
        )
        if m:
            return _unregistered(model, m.group(1)) or ln
    useful = [ln for ln in lines if not ln.startswith(skip) and "print_allocations" not in ln]
    if useful:
        return useful[0][:200]
    msg = str(exc).strip().splitlines()
    return (msg[-1] if msg else type(exc).__name__)[:200]


def _unregistered(model: bytes | None, opcode: str) -> str | None:
    """The sentence naming the first operator with ``opcode`` (for CUSTOM: the first custom operator
    the wheel does not register) that TFLM failed to find a kernel for, or None."""
    from ..errors import shown
    from ..ir.schema import fb, opcode_name
    from ..ir.validate import TFLM_CUSTOM

    if model is None:
        return None
    try:  # the reader API: no weight buffer is unpacked
        m = fb.Model.GetRootAs(model, 0)
        codes = [
            fb.OperatorCodeT.InitFromObj(m.OperatorCodes(i)) for i in range(m.OperatorCodesLength())
        ]
        ops = [
            (s, k, m.Subgraphs(s).Operators(k).OpcodeIndex())
            for s in range(m.SubgraphsLength())
            for k in range(m.Subgraphs(s).OperatorsLength())
        ]
    except Exception:
        return None
    for s, k, index in ops:
        if not 0 <= index < len(codes):
            continue
        code = codes[index]
        name = opcode_name(code)
        custom = max(code.builtinCode, code.deprecatedBuiltinCode) == fb.BuiltinOperator.CUSTOM
        if (opcode == "CUSTOM") != custom or (custom and name in TFLM_CUSTOM):
            continue
        if not custom and name != opcode:
            continue
        where = f"operator {k}" if s == 0 else f"subgraph {s} operator {k}"
        kind = "custom operator" if custom else "builtin operator"
        return f"{where} '{shown(name, 60)}' is a {kind} the tflite-micro wheel does not register"
    if opcode == "CUSTOM":  # TFLM_CUSTOM lists one the wheel lacks: name them all
        names = sorted({opcode_name(codes[i]) for _, _, i in ops if 0 <= i < len(codes)} - {""})
        custom = [n for n in names if n in TFLM_CUSTOM]
        return (
            f"one of the custom operators {', '.join(repr(shown(n, 60)) for n in custom)} is not "
            "registered in the tflite-micro wheel"
            if custom
            else None
        )
    return None


def _child_main() -> None:
    """Entry point of the child: read a pickled request on stdin, answer a pickled dict on the original stdout.

    File descriptors 1 and 2 are sent to a temporary file while TFLM runs, so its log never
    mixes with the answer and its text can be quoted in the error message.
    """
    import ctypes
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing child leaves no core file behind
    request = pickle.loads(sys.stdin.buffer.read())
    answer_fd = os.dup(1)
    libc = ctypes.CDLL(None)
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)

    def log_text() -> str:
        libc.fflush(None)
        log.seek(0)
        text = log.read().decode(errors="replace")
        log.seek(0)
        log.truncate()
        return text

    def answer(reply: dict) -> None:
        with os.fdopen(answer_fd, "wb") as out:
            out.write(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
        os._exit(0)

    try:
        from tflite_micro.python.tflite_micro import runtime
    except Exception as exc:  # the wheel is a hard dependency; say so if it is broken
        answer({"error": f"cannot import the tflite-micro wheel: {exc}"})
        return
    cpu_limit(request["seconds"])  # from here on: TFLM's own work, not the child's start-up
    models = request["models"] if "models" in request else [request["model"]]
    each = []
    for k, model in enumerate(models):
        labels = request.get("labels") or [
            f"model {i + 1} of {len(models)}" for i in range(len(models))
        ]
        which = labels[k] if "models" in request else ""
        reply = _serve_one(runtime, model, request, which, log_text, answer)
        each.append(reply)
    answer({"each": each} if "models" in request else each[0])


def _serve_one(runtime, model: bytes, request: dict, which: str, log_text, answer) -> dict:
    """One model's part of a child request; errors end the child through ``answer``."""
    try:
        it = runtime.Interpreter.from_bytes(model, arena_size=request["arena"])
    except Exception as exc:
        answer(
            {
                "error": f"TFLM cannot load {which or 'the model'}: "
                f"{_tflm_reason(exc, log_text(), model)}"
            }
        )
    from ..ir.schema import fb

    sg = fb.Model.GetRootAs(model, 0).Subgraphs(0)
    n_in, n_out = sg.InputsLength(), sg.OutputsLength()
    details = [it.get_input_details(i) for i in range(n_in)]
    kind = request["kind"]
    if kind == "load":
        inputs = [
            {"shape": tuple(int(s) for s in d["shape"]), "dtype": np.dtype(d["dtype"]).str}
            for d in details
        ]
        return {"inputs": inputs} if not which and "models" not in request else inputs

    def invoke(inputs: list) -> None:
        for i, x in enumerate(inputs):
            it.set_input(x, i)
        try:
            it.invoke()
        except Exception as exc:
            answer(
                {
                    "error": f"TFLM cannot run {which or 'the model'}: {_tflm_reason(exc, log_text())}"
                }
            )

    if kind == "usage":
        invoke([np.zeros(d["shape"], d["dtype"]) for d in details])
        log_text()
        it.print_allocations()
        text = log_text()
        import re

        vals = {}
        for key in ("total", "head", "tail"):
            m = re.search(rf"Arena allocation {key} (\d+) bytes", text)
            if not m:
                answer(
                    {"error": "could not read the arena figures from TFLM's print_allocations()"}
                )
            vals[key] = int(m.group(1))
        return vals
    outputs = []
    for inputs in request["batches"]:
        if len(inputs) != n_in:
            answer({"error": f"{which or 'the model'} has {n_in} inputs, {len(inputs)} given"})
        for i, x in enumerate(inputs):
            want = tuple(int(s) for s in details[i]["shape"])
            if tuple(x.shape) != want or np.dtype(x.dtype) != np.dtype(details[i]["dtype"]):
                answer(
                    {
                        "error": f"{which or 'the model'}: input {i} is {x.dtype}{list(x.shape)}, the model wants "
                        f"{np.dtype(details[i]['dtype'])}{list(want)}"
                    }
                )
        invoke(inputs)
        outputs.append([np.array(it.get_output(i), copy=True) for i in range(n_out)])
    return {"outputs": outputs} if "models" not in request else outputs
