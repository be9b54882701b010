"""The one exception type the CLI turns into a one-line message and a non-zero exit, the exit
codes (the command line and the tflite-tools plugin both return these; docs/cli.md), and
``shown``, the one place that makes a name or path from a model or the command line safe to
print."""

from __future__ import annotations

import os
import unicodedata

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug in tinyseg (never expected; the fuzz tests assert it does not happen)
EXIT_ERROR = 2  # bad input or a model we cannot handle
EXIT_TARGET_NOT_REACHED = 3  # optimize: best model written, target not met
EXIT_VERIFY_FAILED = 4  # verify/optimize: outputs differ; nothing written

NAME_LIMIT = (
    120  # characters of a name or path kept in a message (a model may carry megabyte names)
)
MESSAGE_LIMIT = 2000  # the whole line: the last guard of main()

# Control characters, line and paragraph separators, format characters (bidi overrides) and lone
# surrogates: each could break the one-line message, move the cursor or hide text on a terminal.
_UNSAFE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown(value: object, limit: int = NAME_LIMIT) -> str:
    """``value`` (a str, bytes or path) as it may appear in a message: every control character
    escaped (``\\n``, ``\\x1b``, ...), and, when longer than ``limit`` characters, its middle cut to
    ``...`` (the start and the end, where a path's file name is, stay; ``limit=0``: never cut)."""
    if isinstance(value, bytes):
        text = value.decode(errors="backslashreplace")
    elif isinstance(value, os.PathLike):
        text = os.fsdecode(value)
    else:
        text = str(value)
    text = text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")
    if not limit:
        return _escaped(text)
    keep = max(limit - 3, 2)
    if len(text) > 2 * limit:  # escape only the ends that stay: a megabyte name costs no time
        head, tail = _escaped(text[:limit]), _escaped(text[-limit:])
        return head[: keep - keep // 2] + "..." + tail[len(tail) - keep // 2 :]
    safe = _escaped(text)
    if len(safe) > limit:
        safe = safe[: keep - keep // 2] + "..." + safe[len(safe) - keep // 2 :]
    return safe


def unprintable(text: str) -> str | None:
    """The first character of ``text`` that ``shown`` would escape (None: every one prints as
    itself): names a user gives must print as typed, in messages and tables alike."""
    return next((c for c in text if unicodedata.category(c) in _UNSAFE), None)


def _escaped(text: str) -> str:
    return "".join(_escape(c) if unicodedata.category(c) in _UNSAFE else c for c in text)


class TinySegError(Exception):
    """A user-facing failure: bad input, an unplannable model, a failed verification.

    The message is a single line that tells the user what is wrong; ``exit_code``
    is what the command-line tool returns (see docs/cli.md for the table). Names and
    paths in it go through ``shown``.
    """

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code
