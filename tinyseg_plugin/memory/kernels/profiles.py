"""The runtime forks' kernel sets: which kernel implementation each operator gets in each TFLM tree a
user deploys with (``--kernel-set NAME``), and the build profile of its usual build.

A fork's kernel set is one like ``reference`` and ``cmsis_nn`` (same functions), built by
routing each operator to the implementation the tree compiles for it:

* ``arduino`` -- the Arduino_TensorFlowLite library (TFLM of 2023-02, the Nicla Vision's
  Cortex-M7): CMSIS-NN for ADD, CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, MUL,
  AVERAGE/MAX_POOL_2D, SOFTMAX and SVDF (its src/.../kernels/cmsis_nn/ holds exactly
  these); every other operator, TRANSPOSE_CONV included, runs the reference kernel. So a
  plan for it sizes TRANSPOSE_CONV's scratch like reference (one int32 accumulator over the
  output), not like CMSIS-NN (two buffers).
* ``zephyr`` -- Zephyr's tflite-micro module with CMSIS-NN: its CMakeLists lists the
  CMSIS-NN sources by hand and TRANSPOSE_CONV is not among them; the other operators with a
  CMSIS-NN kernel get it.
* ``edge-impulse`` -- the Edge Impulse SDK on a Cortex-M (EI_CLASSIFIER_TFLITE_ENABLE_CMSIS_NN):
  CMSIS-NN kernels, its transpose_conv.cc has no CMSIS-NN branch (reference, or an
  accelerator's on other chips).
* ``esp-idf`` -- esp-tflite-micro: ESP-NN replaces ADD, CONV_2D, DEPTHWISE_CONV_2D,
  FULLY_CONNECTED, MUL, pooling and SOFTMAX (CMakeLists.txt removes those reference
  files); the rest is reference. ESP-NN's scratch (esp_nn_get_conv_scratch_size, ...) is
  chip-specific and its library is not modelled: those operators are reported as unknown
  (Plan.unknown_ops), never guessed.

The persistent (tail) rules follow the implementation's upstream figures; the 2023 TFLM
of the Arduino library is not modelled separately (its tail is an estimate, as the tail is).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from ...ir.graph import Graph, Operator
from . import cmsis_nn, reference

# Operators with a CMSIS-NN kernel in the Arduino library (src/tensorflow/lite/micro/kernels/cmsis_nn/*.cpp).
ARDUINO_CMSIS_NN = frozenset(
    {
        "ADD",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "MUL",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
        "SOFTMAX",
        "SVDF",
    }
)
# Operators ESP-NN replaces in esp-tflite-micro (its kernels/esp_nn/*.cc).
ESP_NN = frozenset(
    {
        "ADD",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "MUL",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
        "SOFTMAX",
    }
)
# Every operator upstream TFLM has a CMSIS-NN kernel for (kernels/cmsis_nn.py).
UPSTREAM_CMSIS_NN = frozenset(
    {
        "ADD",
        "BATCH_MATMUL",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "MAXIMUM",
        "MINIMUM",
        "MUL",
        "PAD",
        "PADV2",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
        "SOFTMAX",
        "SVDF",
        "TRANSPOSE",
        "TRANSPOSE_CONV",
        "UNIDIRECTIONAL_SEQUENCE_LSTM",
    }
)


@dataclass(frozen=True)
class ForkKernelSet:
    """A runtime fork's kernel set: it routes each operator to `optimized` or to the reference kernel."""

    name: str
    optimized: ModuleType | None  # the optimized kernel set, or None (not modelled)
    optimized_ops: frozenset[str]  # operators that run the optimized implementation
    build_profile: str  # the build profile of the tree's usual build (its pointer width)
    implementation: str  # what the optimized kernels are called, for reports
    dsp: bool = True  # CMSIS-NN built with ARM_MATH_DSP (Cortex-M4/M7); False: plain C

    def implementation_of(self, opcode: str) -> str:
        return self.implementation if opcode in self.optimized_ops else "reference"

    def _module(self, opcode: str) -> ModuleType | None:
        return self.optimized if opcode in self.optimized_ops else reference

    def scratch_requests(self, graph: Graph, op: Operator, pointer_bytes: int) -> list[int] | None:
        m = self._module(op.opcode)
        if m is cmsis_nn:
            return cmsis_nn.scratch_requests_for(graph, op, pointer_bytes, dsp=self.dsp)
        return None if m is None else m.scratch_requests(graph, op, pointer_bytes)

    def opdata_bytes(self, opcode: str, pointer_bytes: int, compression: bool | None = None) -> int:
        m = self._module(opcode) or reference
        return m.opdata_bytes(opcode, pointer_bytes, compression)

    def prepare_allocations(self, graph: Graph, op: Operator, pointer_bytes: int) -> list[int]:
        return (self._module(op.opcode) or reference).prepare_allocations(graph, op, pointer_bytes)

    def persistent_allocations(self, graph: Graph, op: Operator, pointer_bytes: int) -> list[int]:
        return (self._module(op.opcode) or reference).persistent_allocations(
            graph, op, pointer_bytes
        )

    def persistent_bytes(self, graph: Graph, op: Operator, pointer_bytes: int) -> int:
        return (self._module(op.opcode) or reference).persistent_bytes(graph, op, pointer_bytes)

    def default_compression(self, pointer_bytes: int) -> bool:
        return False  # these trees build without USE_TFLM_COMPRESSION


FORK_KERNEL_SETS: dict[str, ForkKernelSet] = {
    "arduino": ForkKernelSet("arduino", cmsis_nn, ARDUINO_CMSIS_NN, "cortex-m", "cmsis-nn"),
    "zephyr": ForkKernelSet(
        "zephyr", cmsis_nn, UPSTREAM_CMSIS_NN - {"TRANSPOSE_CONV"}, "cortex-m", "cmsis-nn"
    ),
    "edge-impulse": ForkKernelSet(
        "edge-impulse", cmsis_nn, UPSTREAM_CMSIS_NN - {"TRANSPOSE_CONV"}, "cortex-m", "cmsis-nn"
    ),
    "esp-idf": ForkKernelSet("esp-idf", None, ESP_NN, "cortex-m", "esp-nn"),
}
