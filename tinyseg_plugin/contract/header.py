"""tflm_ops/kernels/tinyseg_contract.h, generated: the contract's numbers and rules
(contract/customops.py) and the stages' keys (contract/stages/) as C++14 constants and checks, so
the kernels spell no name, key or limit themselves. Regenerate with `python -m tinyseg_plugin.contract.header > tflm_ops/kernels/tinyseg_contract.h`."""

from __future__ import annotations

from .customops import (
    BLOCK_HEADER_BYTES,
    CONTRACT_VERSION,
    CONV_AXIS,
    CONV_BIAS_TYPES,
    CONV_RANK,
    CONV_TYPES,
    ELEMENT_BYTES,
    FETCHED_FIXED_BYTES,
    FETCHED_KEYS,
    FETCHED_POINTERS,
    FETCHING,
    FETCHING_CONV_2D,
    FETCHING_CONV_HEADER_BYTES,
    FETCHING_HEADER_BYTES,
    INT_LIMITS,
    KEYS,
    MAX_DIMS,
    MAX_REGIONS,
    MAX_ROW_STREAMS,
    PER_CHANNEL_BYTES,
    SPILL,
    SPILL_OPDATA_BYTES,
    SPILL_STREAM_BYTES,
    STREAM_ACCUMULATING_OPS,
    STREAM_ACCUMULATOR_BYTES,
    STREAM_CHAIN,
    STREAM_CHAIN_OPDATA_BYTES,
    STREAM_DEQUANTIZE_TYPES,
    STREAM_EDGE_BYTES,
    STREAM_FIELD_KEYS,
    STREAM_FIELD_LIMITS,
    STREAM_INT32_PER_STAGE,
    STREAM_INT32_PER_TENSOR,
    STREAM_LOOKUP_TABLE_BYTES,
    STREAM_LOOKUP_TABLE_OPS,
    STREAM_MAX_BODY_BYTES,
    STREAM_MAX_SCALE,
    STREAM_MAX_STAGE_INPUTS,
    STREAM_MIN_SCALE,
    STREAM_PER_CHANNEL_OPS,
    STREAM_QUANTIZE_TYPES,
    STREAM_SCHEDULE_TENSOR_BYTES,
    STREAM_STAGE_BYTES,
    STREAM_STAGE_KEYS,
    STREAM_STAGE_OPS,
    STREAM_TENSOR_BYTES,
    STREAM_TENSOR_KEYS,
    TINYSEG_OPS,
    ZERO_POINT_LIMITS,
)
from .stages import ROWS, keys

_TFLITE_TYPE = {
    "INT8": "kTfLiteInt8",
    "UINT8": "kTfLiteUInt8",
    "INT16": "kTfLiteInt16",
    "INT32": "kTfLiteInt32",
    "INT64": "kTfLiteInt64",
    "FLOAT32": "kTfLiteFloat32",
}


def _cname(key: str) -> str:
    return "k" + "".join(part.capitalize() for part in key.split("_"))


def _stage_keys() -> list[str]:
    """The row types and the (operator, row type) key of every stage of the registry
    (contract/stages/), and the check a kernel's dispatch table static_asserts with them."""
    stage_keys = keys()
    out = [
        "// The row types of a stage (the C++ value is the index of contract/stages/record.py ROWS).",
        "enum class Rows : int32_t { "
        + ", ".join(f"{_cname(r)} = {k}" for k, r in enumerate(ROWS))
        + " };",
        "constexpr const char* kRowsNames[] = {" + ", ".join(f'"{r}"' for r in ROWS) + "};",
        "",
        "// Every stage StreamChain computes, by operator and row type, in the registry's order.",
        "struct StageKey {",
        "  StageOp op;",
        "  Rows rows;",
        "};",
        "constexpr StageKey kStageKeys[] = {",
    ]
    out += [f"    {{StageOp::{_cname(op)}, Rows::{_cname(r)}}}," for op, r in stage_keys]
    out += [
        "};",
        f"constexpr int32_t kNumStageKeys = {len(stage_keys)};",
        "",
        "// Whether a table of entries with .op and .rows (tinyseg_stream.cc kStages) holds every key of",
        "// kStageKeys exactly once and nothing else.",
        "template <typename Entry, size_t N>",
        "constexpr bool StagesMatchKeys(const Entry (&entries)[N]) {",
        "  if (N != static_cast<size_t>(kNumStageKeys)) return false;",
        "  for (size_t k = 0; k < N; ++k) {",
        "    size_t in_entries = 0, in_keys = 0;",
        "    for (size_t i = 0; i < N; ++i) {",
        "      in_entries += entries[i].op == kStageKeys[k].op && entries[i].rows == kStageKeys[k].rows;",
        "      in_keys += entries[k].op == kStageKeys[i].op && entries[k].rows == kStageKeys[i].rows;",
        "    }",
        "    if (in_entries != 1 || in_keys != 1) return false;",
        "  }",
        "  return true;",
        "}",
        "",
    ]
    return out


def _preamble() -> list[str]:
    """The include guard, includes, namespaces, version and operator names."""
    out = [
        "// GENERATED from tinyseg_plugin/contract/customops.py and stages/ by",
        "// `python -m tinyseg_plugin.contract.header`.",
        "// Do not edit: change customops.py or stages/ and regenerate (tests/test_contract.py checks the two agree).",
        "// The custom-operator contract, defined once: option keys, limits, dtype rules, OpData sizes.",
        "#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_",
        "#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <cstring>",
        "",
        '#include "tensorflow/lite/c/common.h"',
        "",
        "namespace tflite {",
        "namespace tinyseg_ops {",
        "namespace contract {",
        "",
        f"constexpr int kVersion = {CONTRACT_VERSION};",
        f'constexpr char kSpill[] = "{SPILL}";',
        f'constexpr char kFetching[] = "{FETCHING}";',
        f'constexpr char kFetchingConv2D[] = "{FETCHING_CONV_2D}";',
        f'constexpr char kStreamChain[] = "{STREAM_CHAIN}";',
        "// How many custom operators the names above register.",
        f"constexpr unsigned int kOpCount = {len(TINYSEG_OPS)};",
        "",
        "// Option keys.",
    ]
    return out


def _limits() -> list[str]:
    """Option keys, stage fields, integer and field limits, quantization ranges."""
    out: list[str] = []
    keys = sorted(
        {k for ks in KEYS.values() for k in ks}
        | set(FETCHED_KEYS)
        | set(STREAM_STAGE_KEYS)
        | set(STREAM_TENSOR_KEYS)
    )
    out += [f'constexpr char {_cname("key_" + k)}[] = "{k}";' for k in keys]
    out += ["", "// Builtin options fields of a StreamChain stage (the TFLite schema's names)."]
    out += [f'constexpr char kField{k[0].upper()}{k[1:]}[] = "{k}";' for k in STREAM_FIELD_KEYS]
    out += ["", "// Integer options: least and greatest accepted value."]
    for k, (lo, hi) in INT_LIMITS.items():
        out.append(f"constexpr int64_t {_cname('min_' + k)} = {lo};")
        out.append(f"constexpr int64_t {_cname('max_' + k)} = {hi};")
    out += [
        "",
        "// A key's least and greatest accepted value.",
        "struct IntLimit {",
        "  const char* key;",
        "  int64_t min;",
        "  int64_t max;",
        "};",
        "",
        "// The integer option limits by key (Options::Int looks an option's limits up here).",
        "constexpr IntLimit kIntLimits[] = {",
    ]
    out += [f'    {{"{k}", {lo}, {hi}}},' for k, (lo, hi) in INT_LIMITS.items()]
    out += ["};", ""]
    out += [
        "// StreamChain stage fields: least and greatest accepted value (a boolean counts 0/1); an absent",
        "// field takes the schema's default.",
        "using FieldLimit = IntLimit;",
        "constexpr FieldLimit kFieldLimits[] = {",
    ]
    out += [f'    {{"{k}", {lo}, {hi}}},' for k, (lo, hi) in STREAM_FIELD_LIMITS.items()]
    out += [
        "};",
        "",
        "// A StreamChain body tensor's quantization (scale finite, in [min, max]; zero point in its type's range),",
        "// and the largest persistent block of one StreamChain.",
        f"constexpr double kStreamMinScale = {STREAM_MIN_SCALE!r};",
        f"constexpr double kStreamMaxScale = {STREAM_MAX_SCALE!r};",
        f"constexpr int64_t kStreamMaxBodyBytes = {STREAM_MAX_BODY_BYTES};",
        "inline bool ZeroPointInRange(TfLiteType type, int64_t zero_point) {",
        "  switch (type) {",
    ]
    for t, (lo, hi) in ZERO_POINT_LIMITS.items():
        out.append(f"    case {_TFLITE_TYPE[t]}: return zero_point >= {lo} && zero_point <= {hi};")
    out += ["    default: return false;", "  }", "}", ""]
    return out


def _sizes() -> list[str]:
    """Rank, region and row-stream counts, and the OpData bytes."""
    out: list[str] = []
    out += [
        f"constexpr int kMaxDims = {MAX_DIMS};",
        f"constexpr int kMaxRegions = {MAX_REGIONS};",
        f"constexpr int kMaxRowStreams = {MAX_ROW_STREAMS};",
        f"constexpr int kConvAxis = {CONV_AXIS};",
        f"constexpr int kConvRank = {CONV_RANK};",
        "",
        "// OpData bytes.",
        f"constexpr size_t kSpillOpDataBytes = {SPILL_OPDATA_BYTES};",
        f"constexpr size_t kFetchingHeaderBytes = {FETCHING_HEADER_BYTES};",
        f"constexpr size_t kFetchingConvHeaderBytes = {FETCHING_CONV_HEADER_BYTES};",
        f"constexpr size_t kFetchedOperandBytes = {FETCHED_FIXED_BYTES} + {FETCHED_POINTERS} * sizeof(void*);",
        f"constexpr size_t kPerChannelBytes = {PER_CHANNEL_BYTES};",
        f"constexpr size_t kBlockHeaderBytes = {BLOCK_HEADER_BYTES};",
        f"constexpr size_t kStreamChainOpDataBytes = {STREAM_CHAIN_OPDATA_BYTES};",
        f"constexpr size_t kStreamTensorBytes = {STREAM_TENSOR_BYTES};",
        f"constexpr size_t kStreamScheduleTensorBytes = {STREAM_SCHEDULE_TENSOR_BYTES};",
        f"constexpr size_t kStreamStageBytes = {STREAM_STAGE_BYTES};",
        f"constexpr size_t kStreamEdgeBytes = {STREAM_EDGE_BYTES};",
        f"constexpr size_t kSpillStreamBytes = {SPILL_STREAM_BYTES};",
        f"constexpr size_t kStreamInt32PerTensor = {STREAM_INT32_PER_TENSOR};",
        f"constexpr size_t kStreamInt32PerStage = {STREAM_INT32_PER_STAGE};",
        f"constexpr int kStreamMaxStageInputs = {STREAM_MAX_STAGE_INPUTS};",
        f"constexpr size_t kStreamLookupTableBytes = {STREAM_LOOKUP_TABLE_BYTES};",
        f"constexpr size_t kStreamAccumulatorBytes = {STREAM_ACCUMULATOR_BYTES};",
        "",
    ]
    return out


def _stage_ops() -> list[str]:
    """The stage operators and which of their inputs are activations; per-channel, lookup-table and
    accumulating stages."""
    out = [
        "// StreamChain: the stages it computes, and which of a stage's inputs are activations.",
        "enum class StageOp : int32_t {",
    ]
    ops = list(STREAM_STAGE_OPS)
    out += [
        f"  k{''.join(p.capitalize() for p in name.split('_'))} = {k},"
        for k, name in enumerate(ops)
    ]
    out += ["  kUnknown = -1,", "};", "", "inline StageOp ParseStageOp(const char* name) {"]
    for name in ops:
        out.append(
            f'  if (std::strcmp(name, "{name}") == 0) return StageOp::k{"".join(p.capitalize() for p in name.split("_"))};'
        )
    out += [
        "  return StageOp::kUnknown;",
        "}",
        "",
        "// Whether input k of a stage is an activation (else a constant: filter, bias, shape).",
        "inline bool IsActivationInput(StageOp op, int k) {",
        "  switch (op) {",
    ]
    for name, positions in STREAM_STAGE_OPS.items():
        cname = "k" + "".join(p.capitalize() for p in name.split("_"))
        cond = "true" if positions is None else " || ".join(f"k == {p}" for p in positions)
        out.append(f"    case StageOp::{cname}: return {cond};")
    out += [
        "    default: return false;",
        "  }",
        "}",
        "",
        "// Whether a stage requantizes per output channel (persistent multiplier and shift).",
        "inline bool PerChannelStage(StageOp op) {",
        "  return "
        + " || ".join(
            f"op == StageOp::k{''.join(p.capitalize() for p in n.split('_'))}"
            for n in STREAM_PER_CHANNEL_OPS
        )
        + ";",
        "}",
        "",
        "// Whether a stage looks elements up in a persistent int8 table (kStreamLookupTableBytes in the pool).",
        "inline bool LookupTableStage(StageOp op) {",
        "  return "
        + " || ".join(
            f"op == StageOp::k{''.join(p.capitalize() for p in n.split('_'))}"
            for n in STREAM_LOOKUP_TABLE_OPS
        )
        + ";",
        "}",
        "",
        "// Whether a stage accumulates every input row into per-channel sums at the end of op_scratch",
        "// (kStreamAccumulatorBytes a channel) and writes its one-pixel output after the last row.",
        "inline bool AccumulatingStage(StageOp op) {",
        "  return "
        + " || ".join(
            f"op == StageOp::k{''.join(p.capitalize() for p in n.split('_'))}"
            for n in STREAM_ACCUMULATING_OPS
        )
        + ";",
        "}",
        "",
    ]
    return out


def _types() -> list[str]:
    """QUANTIZE and DEQUANTIZE type pairs, element bytes, FetchingConv2D types; closing."""
    out: list[str] = []
    out += [
        "// QUANTIZE stages: the (input, output) types computed.",
        "inline bool StreamQuantizeTypes(TfLiteType in, TfLiteType out) {",
        "  return "
        + " ||\n         ".join(
            f"(in == {_TFLITE_TYPE[a]} && out == {_TFLITE_TYPE[b]})"
            for a, b in STREAM_QUANTIZE_TYPES
        )
        + ";",
        "}",
        "",
        "// DEQUANTIZE stages: the (input, output) types computed.",
        "inline bool StreamDequantizeTypes(TfLiteType in, TfLiteType out) {",
        "  return "
        + " ||\n         ".join(
            f"(in == {_TFLITE_TYPE[a]} && out == {_TFLITE_TYPE[b]})"
            for a, b in STREAM_DEQUANTIZE_TYPES
        )
        + ";",
        "}",
        "",
        "// Bytes per element of the types Spill and Fetching move (0: not allowed).",
        "inline size_t ElementBytes(TfLiteType type) {",
        "  switch (type) {",
    ]
    for t, n in ELEMENT_BYTES.items():
        out.append(f"    case {_TFLITE_TYPE[t]}: return {n};")
    out += [
        "    default: return 0;",
        "  }",
        "}",
        "",
        "// FetchingConv2D: the activation/filter type pairs it computes.",
        "inline bool ConvTypes(TfLiteType activation, TfLiteType filter) {",
        "  return "
        + " ||\n         ".join(
            f"(activation == {_TFLITE_TYPE[a]} && filter == {_TFLITE_TYPE[f]})"
            for a, f in CONV_TYPES
        )
        + ";",
        "}",
        "",
        "// FetchingConv2D: the bias types each activation type takes.",
        "inline bool ConvBiasType(TfLiteType activation, TfLiteType bias) {",
        "  return "
        + " ||\n         ".join(
            f"(activation == {_TFLITE_TYPE[a]} && bias == {_TFLITE_TYPE[b]})"
            for a, bs in CONV_BIAS_TYPES.items()
            for b in bs
        )
        + ";",
        "}",
        "",
        "}  // namespace contract",
        "}  // namespace tinyseg_ops",
        "}  // namespace tflite",
        "",
        "#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_CONTRACT_H_",
        "",
    ]
    return out


def header() -> str:
    """tflm_ops/kernels/tinyseg_contract.h: the contract (customops.py) as C++14 constants and checks."""
    out = _preamble() + _limits() + _sizes() + _stage_ops() + _stage_keys() + _types()
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    if sys.argv[1:]:
        print(
            "usage: python -m tinyseg_plugin.contract.header > tflm_ops/kernels/tinyseg_contract.h",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.stdout.write(header())
