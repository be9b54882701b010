"""Per-kernel memory rules: the scratch buffers each kernel requests in Prepare and
the persistent memory it takes, for each TFLM kernel set we model.

A kernel set is a module with ``scratch_requests`` and ``persistent_bytes`` (plus the
tables ``estimate_tail`` reads: ``opdata_bytes``, ``prepare_allocations``,
``default_compression``); this package picks the module and routes TinySeg's own
custom operators to their rules (tinyseg.py), so the planner never needs to know
which kernel set it is planning for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ...contract.customops import is_tinyseg_op, transpose_conv_marker
from ...errors import TinySegError
from ...ir.graph import Graph, Operator
from ..runtimes import BUILD_PROFILE_NAMES, KERNEL_SET_NAMES
from . import cmsis_nn, reference, tinyseg
from .profiles import FORK_KERNEL_SETS, UPSTREAM_CMSIS_NN, ForkKernelSet


class KernelSet(Protocol):
    """What a kernel set tells the planner: the reference and CMSIS-NN modules and every fork's
    ForkKernelSet implement it; KernelRules routes TinySeg's own operators to tinyseg.py."""

    def scratch_requests(
        self, graph: Graph, op: Operator, pointer_bytes: int
    ) -> list[int] | None: ...

    def persistent_bytes(self, graph: Graph, op: Operator, pointer_bytes: int) -> int: ...

    def opdata_bytes(
        self, opcode: str, pointer_bytes: int, compression: bool | None = None
    ) -> int: ...

    def prepare_allocations(self, graph: Graph, op: Operator, pointer_bytes: int) -> list[int]: ...

    def default_compression(self, pointer_bytes: int) -> bool: ...


# Every kernel set (``--kernel-set``): the two upstream ones and the runtime forks' (profiles.py).
KERNEL_SETS: dict[str, KernelSet] = {
    "reference": reference,
    "cmsis-nn": cmsis_nn,
    **FORK_KERNEL_SETS,
}
assert tuple(KERNEL_SETS) == KERNEL_SET_NAMES, "runtimes.py lists every kernel set, in this order"


def default_build_profile(kernel_set: str) -> str:
    """The build profile of a kernel set's usual build: the forks run on 32-bit MCUs; the
    upstream sets keep host64 (the Python wheel the verification uses)."""
    prof = FORK_KERNEL_SETS.get(kernel_set)
    return prof.build_profile if prof is not None else "host64"


@dataclass(frozen=True)
class BuildProfile:
    """The build profile (--build-profile): the build the tail estimate assumes besides its kernels: a
    pointer's width, and by its name which TFLM structure sizes and application setup (planner._TAIL_PROFILES)."""

    name: str
    pointer_bytes: int


BUILD_PROFILES: dict[str, BuildProfile] = {
    "host64": BuildProfile("host64", 8),
    "cortex-m": BuildProfile("cortex-m", 4),
}
assert tuple(BUILD_PROFILES) == BUILD_PROFILE_NAMES, "runtimes.py lists every build profile"


@dataclass
class KernelRules:
    """Scratch and persistent rules for one kernel set on one build profile."""

    kernel_set: str = "reference"
    build_profile: BuildProfile = field(default_factory=lambda: BUILD_PROFILES["host64"])
    unknown_ops: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.kernel_set not in KERNEL_SETS:
            raise TinySegError(
                f"unknown kernel set '{self.kernel_set}' (choose from: {', '.join(KERNEL_SETS)})"
            )

    def scratch_requests(self, graph: Graph, op: Operator) -> list[int]:
        """Bytes of each scratch buffer the operator's kernel requests, in request order."""
        if is_tinyseg_op(op):
            return tinyseg.scratch_requests(graph, op, self.kernel_set)
        if op.opcode == "TRANSPOSE_CONV" and op.intermediates:
            marker = transpose_conv_marker(graph, op)
            if marker is not None:
                return tinyseg.transpose_conv_scratch(graph, op, marker)
        module = KERNEL_SETS[self.kernel_set]
        result = module.scratch_requests(graph, op, self.build_profile.pointer_bytes)
        if result is None:
            self.unknown_ops.add(op.opcode)
            return []
        return result

    def implementation_of(self, opcode: str) -> str:
        """Which implementation the kernel set's tree compiles for an operator ("reference",
        "cmsis-nn", "esp-nn"): the StreamChain kernel's stages size their buffers by it."""
        kernels = KERNEL_SETS[self.kernel_set]
        if isinstance(kernels, ForkKernelSet):
            return kernels.implementation_of(opcode)
        return "cmsis-nn" if kernels is cmsis_nn and opcode in UPSTREAM_CMSIS_NN else "reference"

    def persistent_bytes(self, graph: Graph, op: Operator) -> int:
        """Bytes the kernel allocates from the persistent (tail) section, alignment included."""
        if is_tinyseg_op(op):
            return tinyseg.persistent_bytes(graph, op, self.build_profile.pointer_bytes)
        return KERNEL_SETS[self.kernel_set].persistent_bytes(
            graph, op, self.build_profile.pointer_bytes
        )

    # What the tail estimate needs of the kernel set (planner.estimate_tail), so that the planner
    # asks this object and never a concrete kernel module.
    def opdata_bytes(self, opcode: str, compression: bool | None = None) -> int:
        """Bytes of the OpData the kernel allocates in Init (``compression``: the build's flag)."""
        return KERNEL_SETS[self.kernel_set].opdata_bytes(
            opcode, self.build_profile.pointer_bytes, compression
        )

    def prepare_allocations(self, graph: Graph, op: Operator) -> list[int]:
        """Persistent allocations the kernel makes in Prepare, in order."""
        return KERNEL_SETS[self.kernel_set].prepare_allocations(
            graph, op, self.build_profile.pointer_bytes
        )

    def default_compression(self) -> bool:
        """Whether this kernel set's usual build for this pointer width has TFLM's compression on."""
        return KERNEL_SETS[self.kernel_set].default_compression(self.build_profile.pointer_bytes)

    def builtin_data(self, op: Operator, overrides: dict | None = None) -> tuple[int, int]:
        """(bytes, alignment) of the builtin options TFLM's interpreter parses for the operator:
        the same for every kernel set (the reference module keeps the table)."""
        return reference.builtin_data(op, self.build_profile.pointer_bytes, overrides)
