// StreamChain: row-local operators computed row by row (docs/custom_ops.md, design/streaming.md).
//
// inputs [chain inputs read whole..., constants...], outputs [tensors written whole]; options: the
// planner's figures (ring_bytes, op_scratch, spilled, fetched, block) and the body -- stages
// (builtin operators over chain-local tensor ids), tensors (intermediates, the skips it spills or
// fetches row by row), spill and fetch (local id, slot), rings (local id, rows), source and sink
// (local id, index of the Runtime's row source or sink) and tokens (its last inputs and outputs).
//
// Eval follows tinyseg/chain_schedule.h: every output row of every stage is computed exactly
// once, when a reader first needs it. An intermediate lives in a RowRing of exactly the rows the
// plan gives (arena scratch); a row of a spilled tensor is computed into its ring and appended to
// a SpillManager row stream; a row of a fetched tensor is decoded into its ring with FetchRange.
// Each stage runs TFLM's own reference arithmetic on a band view (the rows of its input window as
// a tensor of that height, with the top padding shifted), as FetchingConv2D does, so every output
// element comes from the same products in the same order as the unfused graph: bit-identical.
// This file is the dispatcher: kStages gives each operator its family's Prepare and Row (the
// other tinyseg_stream_*.cc); _body.cc reads the body tables, _eval.cc moves rows. Memory (the
// planner counts it, memory/kernels/tinyseg.py stream_chain_scratch and
// customops.stream_chain_body_bytes): Init keeps an OpData of kStreamChainOpDataBytes; Prepare
// allocates one persistent block for the chain's tables and requests two scratch buffers: the
// rings plus one codec block per spilled tensor, and op_scratch (a TRANSPOSE_CONV's int32 row,
// int64 for int16, CMSIS-NN's buffers (tinyseg_stream_cmsis.h), then a MEAN's sums).
#include <cstring>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_ops.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tinyseg/chain_schedule.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

// Every stage computed (contract::kStageKeys, the static_assert below): its family's Prepare, Row.
constexpr StageEntry kStages[] = {
    {StageOp::kConv2d, Rows::kQuantized, PrepareConv, ConvRow},
    {StageOp::kDepthwiseConv2d, Rows::kQuantized, PrepareConv, DepthwiseConvRow},
    {StageOp::kTransposeConv, Rows::kQuantized, PrepareConv, TransposeConvRow},
    {StageOp::kMaxPool2d, Rows::kQuantized, PreparePool, MaxPoolRow},
    {StageOp::kAveragePool2d, Rows::kQuantized, PreparePool, AveragePoolRow},
    {StageOp::kAdd, Rows::kQuantized, PrepareArithmetic, ArithmeticRow},
    {StageOp::kSub, Rows::kQuantized, PrepareArithmetic, ArithmeticRow},
    {StageOp::kMul, Rows::kQuantized, PrepareArithmetic, ArithmeticRow},
    {StageOp::kQuantize, Rows::kQuantized, PrepareQuantize, QuantizeRow},
    {StageOp::kDequantize, Rows::kQuantized, PrepareDequantize, DequantizeRow},
    {StageOp::kLogistic, Rows::kQuantized, PrepareSigmoid, LogisticRow},
    {StageOp::kTanh, Rows::kQuantized, PrepareSigmoid, TanhRow},
    {StageOp::kRelu, Rows::kQuantized, PrepareRelu, ReluRow},
    {StageOp::kRelu6, Rows::kQuantized, PrepareRelu6, Relu6Row},
    {StageOp::kHardSwish, Rows::kQuantized, PrepareHardSwish, HardSwishRow},
    {StageOp::kLeakyRelu, Rows::kQuantized, PrepareLeakyRelu, LeakyReluRow},
    {StageOp::kPrelu, Rows::kQuantized, PreparePrelu, PreluRow},
    {StageOp::kElu, Rows::kQuantized, PrepareElu, EluRow},
    {StageOp::kPad, Rows::kQuantized, PreparePad, PadRow},
    {StageOp::kPadv2, Rows::kQuantized, PreparePad, PadRow},
    {StageOp::kResizeNearestNeighbor, Rows::kQuantized, PrepareResize, ResizeRow},
    {StageOp::kResizeBilinear, Rows::kQuantized, PrepareResizeBilinear, ResizeBilinearRow},
    {StageOp::kConcatenation, Rows::kQuantized, PrepareConcatenation, ConcatenationRow},
    // float32 rows: TFLM's reference float arithmetic in every build (the families', _float.cc).
    {StageOp::kConv2d, Rows::kFloat32, PrepareConvFloat, ConvFloatRow},
    {StageOp::kDepthwiseConv2d, Rows::kFloat32, PrepareConvFloat, DepthwiseConvFloatRow},
    {StageOp::kTransposeConv, Rows::kFloat32, PrepareConvFloat, TransposeConvFloatRow},
    {StageOp::kConcatenation, Rows::kFloat32, PrepareConcatenationFloat, ConcatenationRow},
    {StageOp::kAdd, Rows::kFloat32, PrepareArithmeticFloat, ArithmeticFloatRow},
    {StageOp::kMul, Rows::kFloat32, PrepareArithmeticFloat, ArithmeticFloatRow},
    {StageOp::kMaxPool2d, Rows::kFloat32, PreparePoolFloat, MaxPoolFloatRow},
    {StageOp::kAveragePool2d, Rows::kFloat32, PreparePoolFloat, AveragePoolFloatRow},
    {StageOp::kResizeNearestNeighbor, Rows::kFloat32, PrepareResizeFloat, ResizeFloatRow},
    {StageOp::kRelu, Rows::kFloat32, PrepareSameShapeFloat, ReluFloatRow},
    {StageOp::kRelu6, Rows::kFloat32, PrepareSameShapeFloat, Relu6FloatRow},
    {StageOp::kLogistic, Rows::kFloat32, PrepareSameShapeFloat, LogisticFloatRow},
    {StageOp::kPad, Rows::kFloat32, PreparePadFloat, PadFloatRow},
    {StageOp::kQuantize, Rows::kFloat32, PrepareQuantizeFloat, QuantizeFloatRow},
    {StageOp::kSub, Rows::kFloat32, PrepareArithmeticFloat, ArithmeticFloatRow},
    {StageOp::kTanh, Rows::kFloat32, PrepareSameShapeFloat, TanhFloatRow},
    {StageOp::kHardSwish, Rows::kFloat32, PrepareSameShapeFloat, HardSwishFloatRow},
    {StageOp::kElu, Rows::kFloat32, PrepareEluFloat, EluFloatRow},
    {StageOp::kLeakyRelu, Rows::kFloat32, PrepareLeakyReluFloat, LeakyReluFloatRow},
    {StageOp::kPrelu, Rows::kFloat32, PreparePreluFloat, PreluFloatRow},
    {StageOp::kPadv2, Rows::kFloat32, PreparePadv2Float, PadFloatRow},
    {StageOp::kResizeBilinear, Rows::kFloat32, PrepareResizeBilinearFloat, ResizeBilinearFloatRow},
    {StageOp::kMean, Rows::kQuantized, PrepareMean, MeanRow},  // _reduce.cc: ends its chain
    {StageOp::kMean, Rows::kFloat32, PrepareMeanFloat, MeanFloatRow},
    // int16 rows, int8 weights (TFLM's 16x8): _int16.cc, _int16_more.cc, _int16_tconv.cc.
    {StageOp::kConv2d, Rows::kInt16, PrepareConvInt16, ConvInt16Row},
    {StageOp::kDepthwiseConv2d, Rows::kInt16, PrepareConvInt16, DepthwiseConvInt16Row},
    {StageOp::kMaxPool2d, Rows::kInt16, PreparePoolInt16, MaxPoolInt16Row},
    {StageOp::kAveragePool2d, Rows::kInt16, PreparePoolInt16, AveragePoolInt16Row},
    {StageOp::kAdd, Rows::kInt16, PrepareArithmeticInt16, ArithmeticInt16Row},
    {StageOp::kSub, Rows::kInt16, PrepareArithmeticInt16, ArithmeticInt16Row},
    {StageOp::kMul, Rows::kInt16, PrepareArithmeticInt16, ArithmeticInt16Row},
    {StageOp::kPad, Rows::kInt16, PreparePadInt16, PadInt16Row},
    {StageOp::kResizeNearestNeighbor, Rows::kInt16, PrepareResizeInt16, ResizeInt16Row},
    {StageOp::kRelu, Rows::kInt16, PrepareReluInt16, ReluInt16Row},
    {StageOp::kRelu6, Rows::kInt16, PrepareRelu6Int16, Relu6Int16Row},
    {StageOp::kLogistic, Rows::kInt16, PrepareSigmoidInt16, LogisticInt16Row},
    {StageOp::kTanh, Rows::kInt16, PrepareSigmoidInt16, TanhInt16Row},
    {StageOp::kLeakyRelu, Rows::kInt16, PrepareLeakyReluInt16, LeakyReluInt16Row},
    {StageOp::kPrelu, Rows::kInt16, PreparePreluInt16, PreluInt16Row},  // _int16_more.cc
    {StageOp::kMean, Rows::kInt16, PrepareMeanInt16, MeanInt16Row},     // _reduce.cc
    {StageOp::kConcatenation, Rows::kInt16, PrepareConcatenationInt16, ConcatenationRow},
    {StageOp::kQuantize, Rows::kInt16, PrepareQuantize, QuantizeRow},
    {StageOp::kDequantize, Rows::kInt16, PrepareDequantize, DequantizeRow},
    {StageOp::kTransposeConv, Rows::kInt16, PrepareTransposeConvInt16, TransposeConvInt16Row},
    {StageOp::kPadv2, Rows::kInt16, PreparePadv2Int16, PadInt16Row},  // _int16_tconv.cc
};
constexpr int32_t kNumStages = static_cast<int32_t>(sizeof(kStages) / sizeof(kStages[0]));
static_assert(contract::StagesMatchKeys(kStages),
              "kStages differs from the contract's kStageKeys (contract/stages/)");

// kStages' entry for an operator on rows of this type; -1 for one the kernel does not compute.
int32_t FindStage(StageOp op, Rows rows) {
  for (int32_t i = 0; i < kNumStages; ++i) {
    if (kStages[i].op == op && kStages[i].rows == rows) return i;
  }
  return -1;
}

// The type of a stage's rows: its first activation input's, and int16 for a QUANTIZE into int16.
Rows RowsOf(int32_t input_type, int32_t output_type) {
  if (input_type == kTfLiteFloat32) return Rows::kFloat32;
  if (input_type == kTfLiteInt16 || output_type == kTfLiteInt16) return Rows::kInt16;
  return Rows::kQuantized;
}

// ------------------------------------------------------------ Init

void* StreamInit(TfLiteContext* context, const char* buffer, size_t length) {
  tinyseg_ops::Options options;
  if (!options.Open(kOp, buffer, length)) return nullptr;
  int64_t ring = 0, scratch = 0, spilled = 0, fetched = 0, block = 0;
  if (!options.Int(contract::kKeyRingBytes, &ring) ||
      !options.Int(contract::kKeyOpScratch, &scratch) ||
      !options.Int(contract::kKeySpilled, &spilled) ||
      !options.Int(contract::kKeyFetched, &fetched) || !options.Int(contract::kKeyBlock, &block)) {
    return nullptr;
  }
  const flexbuffers::Map& m = options.map();
  if (!IsVector(m[contract::kKeyStages]) || !IsVector(m[contract::kKeyTensors]) ||
      !IsVector(m[contract::kKeySpill]) || !IsVector(m[contract::kKeyFetch]) ||
      !IsVector(m[contract::kKeyRings]) || VectorSize(m[contract::kKeyStages]) == 0) {
    MicroPrintf(
        "StreamChain: the options hold no body (stages, tensors, spill, fetch, rings): "
        "a planning-only model cannot run");
    return nullptr;
  }
  auto* d = static_cast<StreamOpData*>(
      context->AllocatePersistentBuffer(context, contract::kStreamChainOpDataBytes));
  if (d == nullptr) return nullptr;
  std::memset(d, 0, sizeof(StreamOpData));
  d->options = reinterpret_cast<const uint8_t*>(buffer);
  d->options_bytes = length;
  d->ring_bytes = static_cast<int32_t>(ring);
  d->op_scratch = static_cast<int32_t>(scratch);
  d->spilled = static_cast<int32_t>(spilled);
  d->fetched = static_cast<int32_t>(fetched);
  d->block = static_cast<int32_t>(block);
  d->ring_index = -1;
  d->op_scratch_index = -1;
  return d;
}

// ------------------------------------------------------------ Prepare

// Stage `index`: what every stage has (tinyseg_stream_body.cc), then its family's Prepare.
TfLiteStatus PrepareStage(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                          const Tables& tab, int32_t index, const flexbuffers::Map& st,
                          int32_t* operand_next, int32_t* edge_next, int32_t* pool_next) {
  const flexbuffers::Reference f = st[contract::kKeyFields];
  const flexbuffers::Map fields = f.IsMap() ? f.AsMap() : flexbuffers::Map::EmptyMap();
  StageArgs a = {};
  a.fields = &fields;
  a.pool_next = pool_next;
  TF_LITE_ENSURE_STATUS(
      PrepareStageCommon(context, node, d, tab, index, st, operand_next, edge_next, &a));
  StageSlot& g = tab.stage(index);
  const Rows rows = RowsOf(tab.tensor(g.input).type, tab.tensor(g.output).type);
  g.entry = static_cast<int16_t>(FindStage(g.op, rows));  // kNumStageKeys fits (StageSlot)
  if (g.entry < 0) {
    MicroPrintf("StreamChain: stage %d is not a stage this kernel computes (on %s rows)",
                static_cast<int>(index), contract::kRowsNames[static_cast<int32_t>(rows)]);
    return kTfLiteError;
  }
  return kStages[g.entry].prepare(a, g);
}

// The scratch buffers: the rings and one codec block per spilled tensor, then op_scratch.
TfLiteStatus RequestScratch(TfLiteContext* context, StreamOpData* d) {
  const int64_t scratch =
      static_cast<int64_t>(d->ring_bytes) + static_cast<int64_t>(d->spilled) * d->block;
  TF_LITE_ENSURE(context, scratch <= INT32_MAX);
  if (scratch > 0) {
    TF_LITE_ENSURE_STATUS(context->RequestScratchBufferInArena(
        context, static_cast<size_t>(scratch), &d->ring_index));
  }
  if (d->op_scratch > 0) {
    TF_LITE_ENSURE_STATUS(
        context->RequestScratchBufferInArena(context, d->op_scratch, &d->op_scratch_index));
  }
  return kTfLiteOk;
}

TfLiteStatus StreamPrepare(TfLiteContext* context, TfLiteNode* node) {
  TF_LITE_ENSURE_MSG(context, node->user_data != nullptr,
                     "StreamChain: bad custom options (see the message above)");
  auto* d = static_cast<StreamOpData*>(node->user_data);
  const flexbuffers::Map m = flexbuffers::GetRoot(d->options, d->options_bytes).AsMap();
  TF_LITE_ENSURE_STATUS(Count(context, node, d, m));
  const size_t bytes = static_cast<size_t>(BodyBytes(*d));  // <= kStreamMaxBodyBytes (Count)
  d->tables = static_cast<uint8_t*>(context->AllocatePersistentBuffer(context, bytes));
  TF_LITE_ENSURE(context, d->tables != nullptr);
  std::memset(d->tables, 0, bytes);
  const Tables tab = Layout(*d);
  TF_LITE_ENSURE_STATUS(PrepareTensors(context, node, *d, tab, m));
  TF_LITE_ENSURE_STATUS(PreparePairs(context, node, *d, tab, m));
  const flexbuffers::Reference stages = m[contract::kKeyStages];
  int32_t operand_next = 0, edge_next = 0, pool_next = 0;
  for (int32_t k = 0; k < d->num_stages; ++k) {
    TF_LITE_ENSURE_STATUS(PrepareStage(context, node, *d, tab, k,
                                       At(stages, static_cast<size_t>(k)).AsMap(), &operand_next,
                                       &edge_next, &pool_next));
  }
  TF_LITE_ENSURE(context, edge_next == d->num_edges && pool_next == d->per_channel);
  TF_LITE_ENSURE_STATUS(PrepareSchedule(context, node, *d, tab));
  return RequestScratch(context, d);
}

// ------------------------------------------------------------ Eval

// Row y of stage `stage`: its input's band, its family's Row, then the row spilled or sunk.
::tinyseg::Status ComputeRow(const EvalState& v, int32_t stage, int32_t y) {
  const StageSlot& g = v.tab.stage(stage);
  const TensorSlot& out = v.tab.tensor(g.output);
  const TensorSlot& in = v.tab.tensor(g.input);
  uint8_t* dst = nullptr;
  TINYSEG_RETURN_IF_ERROR(OutputRow(v, g, y, &dst));
  int32_t lo = 0, hi = 0;
  TINYSEG_RETURN_IF_ERROR(Window(v, stage, g.input, y, &lo, &hi));
  const uint8_t* src = nullptr;
  TINYSEG_RETURN_IF_ERROR(Band(v, g.input, lo, hi, &src));
  StageRow r;
  r.y = y;
  r.lo = lo;
  r.rows = hi >= lo ? hi - lo + 1 : 0;
  r.src = src;
  r.dst = dst;
  r.in = &in;
  r.out = &out;
  const int32_t in_dims[4] = {1, r.rows, in.width, in.channels};
  const int32_t out_dims[4] = {1, 1, out.width, out.channels};
  r.in_shape.ReplaceWith(4, in_dims);
  r.out_shape.ReplaceWith(4, out_dims);
  if (g.entry < 0 || g.entry >= kNumStages) return ::tinyseg::Status::kInvalidArgument;
  TINYSEG_RETURN_IF_ERROR(kStages[g.entry].row(v, g, r));
  if (out.stream >= 0) {
    TINYSEG_RETURN_IF_ERROR(
        v.rt->storage(out.spill_region)
            ->Append(&v.tab.stream(out.stream), dst, static_cast<size_t>(out.row_bytes)));
  }
  if (out.sink >= 0) TINYSEG_RETURN_IF_ERROR(SinkRow(v, out, y, dst));
  return ::tinyseg::Status::kOk;
}

TfLiteStatus StreamEval(TfLiteContext* context, TfLiteNode* node) {
  EvalState v;
  uint8_t* rings = nullptr;
  TF_LITE_ENSURE_STATUS(BeginEval(context, node, &v, &rings));
  TF_LITE_ENSURE_STATUS(OpenStreams(v, rings));
  const StreamOpData* d = v.d;
  ::tinyseg::ChainSchedule schedule;
  v.schedule = &schedule;
  ::tinyseg::Status st = schedule.Init(v.tab.schedule, d->num_tensors, v.tab.chain_stages,
                                       d->num_stages, v.tab.edges, d->num_edges, v.tab.order,
                                       d->num_order, ::tinyseg::ChainState{v.tab.done, v.tab.held});
  if (::tinyseg::Ok(st)) {
    st = schedule.Run([&v](int32_t s, int32_t y) { return ComputeRow(v, s, y); },
                      [&v](int32_t t, int32_t row) { return FetchRow(v, t, row); });
  }
  if (!::tinyseg::Ok(st)) {
    MicroPrintf("StreamChain: running the chain failed: %s%s", ::tinyseg::StatusName(st),
                FaultHint(v, st));
    return kTfLiteError;
  }
  return EndEval(v);
}

}  // namespace
}  // namespace tinyseg_stream

TFLMRegistration Register_STREAM_CHAIN() {
  return micro::RegisterOp(tinyseg_stream::StreamInit, tinyseg_stream::StreamPrepare,
                           tinyseg_stream::StreamEval);
}

}  // namespace tflite
