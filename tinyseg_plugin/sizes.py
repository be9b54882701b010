"""Byte sizes and rates as users type them ('160KB', '150KiB', '1MB'; '0.5' inferences per
second): one parser for the CLI, the tflite-tools plugin and board files, so that `--target` means
the same in each, and one set of bounds, so that no figure a user types can overflow the
arithmetic after it or take unbounded work to print."""

from __future__ import annotations

import math
import re

UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KIB": 1024,
    "KB": 1000,
    "M": 1 << 20,
    "MIB": 1 << 20,
    "MB": 1_000_000,
}
# 256 TiB: the address space of a 48-bit virtual address, past any memory a board or host has.
MAX_SIZE = 1 << 48
MAX_DIGITS = 20  # digits of a typed number (2^64 has 20): a 400-digit figure is a typo or an attack
MAX_TEXT = 40  # characters of a typed figure kept in a message
# Inferences per second the wear-out figures assume: one every 31 years up to a billion a second.
MIN_RATE, MAX_RATE = 1e-9, 1e9


def _quoted(text: str) -> str:
    """The figure as typed, quoted, cut to MAX_TEXT characters, control characters escaped."""
    return repr(text) if len(text) <= MAX_TEXT else repr(text[: MAX_TEXT - 3] + "...")


def _digits(text: str) -> None:
    """Refuse a figure of more than MAX_DIGITS digits before anything converts it."""
    if sum(c.isdigit() for c in text) > MAX_DIGITS:
        raise ValueError(f"{_quoted(text)} has more than {MAX_DIGITS} digits")


def parse_size(text: str) -> int:
    """'153600', '150KiB', '150K' (KiB), '153.6KB', '1.2MB', '1MiB' -> bytes, from 1 to MAX_SIZE;
    ValueError (one sentence) otherwise."""
    _digits(text)
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text[: 4 * MAX_TEXT])
    if len(text) > 4 * MAX_TEXT or not m or m.group(2).upper() not in UNITS:
        raise ValueError(f"{_quoted(text)} is not a size (examples: 153600, 150KiB, 153.6KB, 1MB)")
    value = float(m.group(1)) * UNITS[m.group(2).upper()]
    if value > MAX_SIZE:
        raise ValueError(f"{_quoted(text)} is more than {MAX_SIZE:,} B (256 TiB)")
    if int(value) <= 0:
        raise ValueError(f"{_quoted(text)}: the size must be at least 1 byte")
    return int(value)


def parse_rate(text: str) -> float:
    """``--rate``: inferences per second, a plain number from MIN_RATE to MAX_RATE; ValueError
    (one sentence) otherwise."""
    _digits(text)
    figure = text.strip()
    try:
        value = float(figure) if len(figure) <= MAX_TEXT else None
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        raise ValueError(
            f"{_quoted(text)} is not a number of inferences per second (e.g. 1, 0.5, 30)"
        )
    if not MIN_RATE <= value <= MAX_RATE:
        raise ValueError(
            f"{_quoted(text)}: the rate must be a positive number from {MIN_RATE:g} to {MAX_RATE:g} inferences per second"
        )
    return value
