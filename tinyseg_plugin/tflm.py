"""The real TFLM interpreter (the ``tflite-micro`` wheel) as ground truth.

Memory figures come from ``print_allocations()``, which prints from C++ straight
to file descriptor 1; we capture it at the descriptor level. Outputs come from
``invoke()`` with the reference kernels.
"""
from __future__ import annotations

import ctypes
import os
import re
import tempfile
from dataclasses import dataclass

import numpy as np

from .errors import TinySegError

DEFAULT_ARENA = 64 << 20
_LIBC = ctypes.CDLL(None)


@dataclass(frozen=True)
class ArenaUsage:
    head: int
    tail: int
    total: int


def _interpreter(model: bytes, arena_size: int):
    from tflite_micro.python.tflite_micro import runtime

    try:
        return runtime.Interpreter.from_bytes(model, arena_size=arena_size)
    except Exception as exc:  # the wrapper raises RuntimeError with TFLM's log
        msg = str(exc).strip().splitlines()
        raise TinySegError(f"TFLM cannot load the model: {msg[-1] if msg else type(exc).__name__}") from None


def _capture_fds(fn) -> str:
    """Run fn() and return what C code wrote to file descriptors 1 and 2 meanwhile
    (TFLM's DebugLog writes to stderr on the host)."""
    _LIBC.fflush(None)
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as tmp:
        for fd in saved:
            os.dup2(tmp.fileno(), fd)
        try:
            fn()
            _LIBC.fflush(None)
        finally:
            for fd, keep in saved.items():
                os.dup2(keep, fd)
                os.close(keep)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


def _count(model: bytes, outputs: bool) -> int:
    from .schema import fb

    sg = fb.Model.GetRootAs(model, 0).Subgraphs(0)
    return sg.OutputsLength() if outputs else sg.InputsLength()


def zero_inputs(it, model: bytes) -> list[np.ndarray]:
    out = []
    for i in range(_count(model, outputs=False)):
        d = it.get_input_details(i)
        out.append(np.zeros(d["shape"], d["dtype"]))
    return out


def arena_usage(model: bytes, arena_size: int = DEFAULT_ARENA) -> ArenaUsage:
    """Head, tail and total as the recording allocator reports them after one invoke on zeros."""
    it = _interpreter(model, arena_size)
    for i, x in enumerate(zero_inputs(it, model)):
        it.set_input(x, i)
    try:
        it.invoke()
    except Exception as exc:
        raise TinySegError(f"TFLM cannot run the model: {str(exc).strip()[:200]}") from None
    text = _capture_fds(it.print_allocations)
    vals = {}
    for key in ("total", "head", "tail"):
        m = re.search(rf"Arena allocation {key} (\d+) bytes", text)
        if not m:
            raise TinySegError("could not read the arena figures from TFLM's print_allocations()")
        vals[key] = int(m.group(1))
    return ArenaUsage(vals["head"], vals["tail"], vals["total"])


def run(model: bytes, inputs: list[np.ndarray], arena_size: int = DEFAULT_ARENA) -> list[np.ndarray]:
    """Outputs of one invoke of the model on the given inputs."""
    it = _interpreter(model, arena_size)
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    try:
        it.invoke()
    except Exception as exc:
        raise TinySegError(f"TFLM cannot run the model: {str(exc).strip()[:200]}") from None
    return [np.array(it.get_output(i), copy=True) for i in range(_count(model, outputs=True))]


def input_details(model: bytes) -> list[dict]:
    it = _interpreter(model, DEFAULT_ARENA)
    return [it.get_input_details(i) for i in range(_count(model, outputs=False))]
