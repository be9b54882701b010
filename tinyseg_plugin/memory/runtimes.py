"""The runtime names (``--runtime``; JSON key ``runtime``), importable without the planner so
the command line can list them cheaply. Their rules: kernels/ (``KERNEL_SETS``, profiles.py)."""

from __future__ import annotations

RUNTIMES = ("reference", "cmsis-nn", "arduino", "zephyr", "edge-impulse", "esp-idf")
