"""Memory rules of TFLM's CMSIS-NN kernels (OPTIMIZED_KERNEL_DIR=cmsis_nn), for Cortex-M7 (DSP, no MVE)."""
from __future__ import annotations

from ..graph import Graph, Operator
from . import reference


def scratch_requests(graph: Graph, op: Operator, pointer_bytes: int) -> list[int] | None:
    return reference.scratch_requests(graph, op, pointer_bytes)


def persistent_bytes(graph: Graph, op: Operator, pointer_bytes: int) -> int:
    return reference.persistent_bytes(graph, op, pointer_bytes)
