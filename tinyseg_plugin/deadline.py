"""The run's deadline (``--time-limit``): the whole command, not only each TFLM run, ends within it.

A command opens one ``within(seconds)`` around its work. Some of that work is one long library
call that no loop of ours can interrupt (the schema's object API unpacks and packs a
20,000-operator model for seconds), so in the main thread a wall-clock timer (SIGALRM) raises
``TimeLimit`` wherever the run is when the time is up; ``check`` stops it at the points where work
grows with the model and names what it was doing. TFLM children get at most ``remaining()``
seconds (and are killed when the timer interrupts the wait). ``paused`` holds the timer where an
interruption would leave a half-done state (the outputs' renames) or where the time is not the
model's (the real-kernel runner's one-time build).

The deadline lives in a context variable: two runs in one process each have their own, and code
called outside any run is never stopped. Wall-clock time, as a user or a CI job waits; each TFLM
child is also bounded in CPU seconds (checks/interpreter.py)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

EXIT_CODE = 2  # docs/cli.md: a model the tool cannot take within the time limit
# --time-limit's default: the slowest optimize measured, ResUNet-a, takes 103 s of CPU
# (docs/results.md, "Speed of tinyseg optimize"); a busy machine may stretch that severalfold
DEFAULT_TIME_LIMIT = 600.0


class TimeLimit(BaseException):
    """The run's --time-limit passed. Like KeyboardInterrupt, not an Exception: the timer may
    raise it inside code that turns its own failures into other messages (``except Exception``),
    and it must reach the command line unchanged. Exit code 2, like every model the tool cannot take."""

    exit_code = EXIT_CODE


@dataclass
class Deadline:
    seconds: float  # the --time-limit given
    end: float  # time.monotonic() at which the run is stopped
    doing: str = "reading the model"  # the first step of every run with a deadline
    held: int = 0  # nested paused() blocks

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def error(self) -> TimeLimit:
        return TimeLimit(
            f"stopped after the --time-limit of {self.seconds:g} s while {self.doing}; give a "
            "larger --time-limit if the model is just large"
        )


_CURRENT: ContextVar[Deadline | None] = ContextVar("tinyseg_deadline", default=None)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _on_alarm(signum, frame) -> None:
    d = _CURRENT.get()
    if d is not None and not d.held:
        raise d.error()


def _arm(d: Deadline) -> None:
    if _main_thread():
        signal.setitimer(signal.ITIMER_REAL, max(d.remaining(), 0.001))


def _disarm() -> None:
    if _main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def within(seconds: float | None) -> Iterator[None]:
    """Run the block under a deadline of ``seconds`` from now (None: no deadline)."""
    if seconds is None:
        yield
        return
    d = Deadline(seconds, time.monotonic() + seconds)
    token = _CURRENT.set(d)
    previous = signal.signal(signal.SIGALRM, _on_alarm) if _main_thread() else None
    try:
        _arm(d)
        yield
    finally:
        _disarm()
        if previous is not None:
            signal.signal(signal.SIGALRM, previous)
        _CURRENT.reset(token)


@contextlib.contextmanager
def paused(extend: bool = False) -> Iterator[None]:
    """Hold the timer during the block; ``extend``: do not count the block's time either."""
    d = _CURRENT.get()
    if d is None:
        yield
        return
    start = time.monotonic()
    d.held += 1
    _disarm()
    try:
        yield
    finally:
        d.held -= 1
        if extend:
            d.end += time.monotonic() - start
        if not d.held:
            _arm(d)


def finish() -> None:
    """The run's work is done and its outputs are about to be written: stop now if the time is up,
    else never again (a run stopped between its renames would leave a mixed set)."""
    d = _CURRENT.get()
    if d is not None:
        check("writing the outputs")
        d.held += 1
        _disarm()


def remaining(default: float) -> float:
    """Seconds left before the deadline (at least a little, so a child can start and be stopped
    cleanly), or ``default`` outside a run with a deadline."""
    d = _CURRENT.get()
    return default if d is None else max(min(default, d.remaining()), 0.05)


def check(doing: str) -> None:
    """Stop the run when its deadline has passed; ``doing`` says where it is (for the message)."""
    d = _CURRENT.get()
    if d is None:
        return
    d.doing = doing
    if not d.held and time.monotonic() > d.end:
        raise d.error()
