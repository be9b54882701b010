"""The kernel set and build profile names (``--kernel-set``, ``--build-profile``; JSON keys
``kernel_set``, ``build_profile``), importable without the planner so
the command line can list them cheaply. Their rules: kernels/ (``KERNEL_SETS``, profiles.py)."""

from __future__ import annotations

BUILD_PROFILE_NAMES = ("host64", "cortex-m")
KERNEL_SET_NAMES = ("reference", "cmsis-nn", "arduino", "zephyr", "edge-impulse", "esp-idf")
