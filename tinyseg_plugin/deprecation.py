"""Old spellings of options, kept for one release: the command line and the tflite-tools plugin
share them, so both warn with the same line."""

from __future__ import annotations

import argparse
import sys


class Deprecated(argparse.Action):
    """An old spelling of an option, kept for one release: it stores what the new one does and
    prints one warning line to stderr (a user's scripts keep working and learn the new name)."""

    def __init__(self, option_strings: list[str], dest: str, use: str, **kwargs) -> None:
        self.use = use
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[override]
        print(f"tinyseg: warning: {option_string} is deprecated; use {self.use}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def deprecated(p, *old: str, use: str, dest: str, **kwargs) -> None:
    """Add each spelling in ``old`` as a hidden, warning alias of option ``use`` (same ``dest``)."""
    for name in old:
        p.add_argument(
            name, dest=dest, action=Deprecated, use=use, default=argparse.SUPPRESS, **kwargs
        )
