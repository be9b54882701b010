"""The one exception type the CLI turns into a one-line message and a non-zero exit."""
from __future__ import annotations


class TinySegError(Exception):
    """A user-facing failure: bad input, an unplannable model, a failed verification.

    The message is a single line that tells the user what is wrong; ``exit_code``
    is what the command-line tool returns (see docs/cli.md for the table).
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
