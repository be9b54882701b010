"""The kernel set names (``--kernel-set``; JSON key ``kernel_set``), importable without the planner so
the command line can list them cheaply. Their rules: kernels/ (``KERNEL_SETS``, profiles.py)."""

from __future__ import annotations

KERNEL_SET_NAMES = ("reference", "cmsis-nn", "arduino", "zephyr", "edge-impulse", "esp-idf")
