"""Byte sizes as users type them ('160KB', '150KiB', '1MB'): one parser for the CLI and the
tflite-tools plugin, so that `--target` means the same in both."""

from __future__ import annotations

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


def parse_size(text: str) -> int:
    """'153600', '150KiB', '150K' (KiB), '153.6KB', '1.2MB', '1MiB' -> bytes; ValueError otherwise."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in UNITS:
        raise ValueError(f"'{text}' is not a size (examples: 153600, 150KiB, 153.6KB, 1MB)")
    value = int(float(m.group(1)) * UNITS[m.group(2).upper()])
    if value <= 0:
        raise ValueError(f"'{text}': the target must be positive")
    return value
