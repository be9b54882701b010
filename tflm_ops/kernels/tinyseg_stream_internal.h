// StreamChain's internal types, shared by the dispatcher (tinyseg_stream.cc), the body tables
// (tinyseg_stream_body.cc), the row plumbing (tinyseg_stream_eval.cc) and the stage families
// (tinyseg_stream_conv.cc, _pool.cc, _arithmetic.cc, _activation.cc, _layout.cc).
//
// A stage family supplies a Prepare (the operator's checks and parameters, as TFLM's own Prepare
// computes them, into its typed state in the StageSlot union) and a Row function (one output row
// from the band of input rows its row map gives); the dispatcher finds both in kStages by the
// stage's operator. Not part of any public interface.
#ifndef TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_STREAM_INTERNAL_H_
#define TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_STREAM_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "tensorflow/lite/c/builtin_op_data.h"
#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/kernels/internal/types.h"
#include "tensorflow/lite/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_contract.h"
#include "tensorflow/lite/micro/micro_context.h"
#include "tinyseg/chain_schedule.h"
#include "tinyseg/row_ring.h"

namespace tflite {
namespace tinyseg_stream {

namespace contract = tinyseg_ops::contract;
using contract::StageOp;

constexpr const char* kOp = contract::kStreamChain;

// ------------------------------------------------------------ persistent layout

// Init: the option numbers and the buffer indices.
struct StreamOpData {
  const uint8_t* options;  // the model's FlexBuffers map (the model outlives the interpreter)
  uint8_t* tables;         // Prepare: the persistent block (Tables below)
  size_t options_bytes;
  int32_t ring_bytes;
  int32_t op_scratch;
  int32_t spilled;  // the SpillStreams: Count checks the "spill" list has as many entries
  int32_t fetched;
  int32_t block;
  int32_t num_tensors;  // records: the node inputs and outputs but the tokens, the body tensors
  int32_t num_slots;    // records with a TensorSlot: all but the plain constants (PlainConstant)
  int32_t num_stages;
  int32_t num_edges;
  int32_t num_operands;
  int32_t num_order;    // outputs the schedule pulls: node outputs but tokens, spilled, sunk
  int32_t num_sink;     // body tensors handed to a row sink
  int32_t num_source;   // body tensors read from a row source
  int32_t per_channel;  // int32 entries of the pool: multiplier/shift per channel, lookup tables
  int32_t accumulator_bytes;  // an accumulating stage's sums, the last bytes of op_scratch
  int16_t in_tokens;          // the node's last inputs that are tokens (no record)
  int16_t out_tokens;         // the node's last outputs that are tokens (no record)
  int ring_index;             // RequestScratchBufferInArena takes int*
  int op_scratch_index;
};
static_assert(sizeof(StreamOpData) <= contract::kStreamChainOpDataBytes,
              "contract: StreamChain OpData");

enum class Kind : int8_t { kNodeInput = 0, kNodeOutput = 1, kBody = 2 };

// One chain-local tensor.
struct TensorSlot {
  ::tinyseg::RowRing ring;
  int32_t height;
  int32_t width;
  int32_t channels;
  int32_t row_bytes;
  int32_t zero_point;
  float scale;
  int32_t ring_rows;    // 0: no ring
  int32_t ring_offset;  // bytes into the ring scratch
  int32_t fetch_slot;   // storage slot it is fetched from; -1
  int16_t stream;       // index of its SpillStream (< kMaxSpilled); -1
  int8_t type;          // TfLiteType
  Kind kind;            // kNodeInput / kNodeOutput: NodeIndex gives its index in the node
  int8_t constant;      // 1: a constant input of the node (never streamed: no schedule edge)
  int8_t spill_region;  // storage region of the slot its stream writes (slot_regions; 0)
  int8_t fetch_region;  // storage region of fetch_slot (slot_regions; 0)
  int8_t source;        // Runtime row source it is read from (input index); -1
  int8_t sink;          // Runtime row sink it is handed to (output index); -1
};
static_assert(sizeof(TensorSlot) <= contract::kStreamTensorBytes,
              "contract: StreamChain tensor record");

// Local ids number the node's inputs, then its outputs, then the body tensors. Tokens (the node's
// last in_tokens inputs and last out_tokens outputs: tensors that carry no data) have no record,
// so a tensor's record index is its local id less the tokens before it.

// The record of local id `id` (0 .. all local tensors - 1); -1 for a token.
inline int32_t RecordOf(const TfLiteNode* node, const StreamOpData& d, int32_t id) {
  const int32_t n_in = node->inputs->size;
  const int32_t n_out = node->outputs->size;
  if (id < n_in - d.in_tokens) return id;
  if (id < n_in) return -1;
  if (id < n_in + n_out - d.out_tokens) return id - d.in_tokens;
  if (id < n_in + n_out) return -1;
  return id - d.in_tokens - d.out_tokens;
}

// The local id of record `i`.
inline int32_t LocalOf(const TfLiteNode* node, const StreamOpData& d, int32_t i) {
  const int32_t inputs = node->inputs->size - d.in_tokens;
  const int32_t outputs = node->outputs->size - d.out_tokens;
  if (i < inputs) return i;
  return i < inputs + outputs ? i + d.in_tokens : i + d.in_tokens + d.out_tokens;
}

// A node input or output's index among the node's inputs or outputs, from its record.
inline int NodeIndex(const TfLiteNode* node, const StreamOpData& d, int32_t i) {
  const int32_t inputs = node->inputs->size - d.in_tokens;
  return i < inputs ? i : i - inputs;
}

// ------------------------------------------------------------ per-family stage state

// CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV (tinyseg_stream_conv.cc).
struct ConvStage {
  int32_t filter;  // node input index
  int32_t bias;    // node input index; -1
  int32_t stride_h, stride_w, dilation_h, dilation_w;
  int32_t filter_h, filter_w;
  int32_t pad_h, pad_w;  // TFLM's padding of the whole operator
  int32_t input_offset, output_offset;
  int32_t act_min, act_max;
  // multiplier[C] then shift[C]: >= 0 their offset in the pool; < 0 ~ their byte offset in the
  // options (the stage's "quant" table, read in place; Multipliers)
  int32_t per_channel;
  float float_min, float_max;  // float32 stages: the fused activation's range
};

// MAX_POOL_2D, AVERAGE_POOL_2D (tinyseg_stream_pool.cc).
struct PoolStage {
  int32_t stride_h, stride_w;
  int32_t filter_h, filter_w;
  int32_t pad_h, pad_w;
  int32_t act_min, act_max;
  float float_min, float_max;  // float32 stages: the fused activation's range
};

// ADD, SUB, MUL (tinyseg_stream_arithmetic.cc): ArithmeticParams' int8 fields.
struct ArithmeticStage {
  int32_t input2;  // second activation input (local id)
  int32_t input1_offset, input2_offset, output_offset;
  int32_t left_shift;
  int32_t input1_multiplier, input2_multiplier, output_multiplier;
  int input1_shift, input2_shift, output_shift;
  int32_t act_min, act_max;
  float float_min, float_max;  // float32 stages: the fused activation's range
};

// QUANTIZE (requantize) and DEQUANTIZE (input_offset: the zero point)
// (tinyseg_stream_activation.cc).
struct QuantizeStage {
  int32_t input_offset, output_offset;
  int32_t multiplier;
  int shift;
};

// LOGISTIC and TANH: the input's fixed-point rescaling (TFLM's int shifts).
struct SigmoidStage {
  int32_t input_zero_point;
  int32_t input_multiplier;
  int input_left_shift;
  int32_t input_range_radius;
};

// The activation stages keep TFLM's own parameter structs, which their rows pass as they are:
// RELU ReluOpData's ReluParams (RELU6 only its clamp, quantized_activation_min and _max),
// HARD_SWISH HardSwishParams, LEAKY_RELU LeakyReluParams (float32 stages: alpha only).
using ReluStage = ReluParams;
using HardSwishStage = HardSwishParams;
using LeakyReluStage = LeakyReluParams;

// PRELU: alpha a constant node input; PreluParams.
struct PreluStage {
  int32_t alpha;  // node input index
  PreluParams params;
};

// ELU: its 256-entry int8 table in the pool.
struct LookupStage {
  int32_t table;  // pool offset
};

// PAD, PADV2 (tinyseg_stream_layout.cc).
struct PadStage {
  int32_t paddings;  // node input index
  int32_t value;     // PADV2: node input index of the pad value; -1
  int32_t top, left, right;
  int32_t front, back;  // channels before and after the input's
  int32_t pad_value;
  float float_value;  // float32 PADV2's pad value
};

// RESIZE_NEAREST_NEIGHBOR.
struct ResizeStage {
  int32_t align_corners;
  int32_t half_pixel_centers;
};

// RESIZE_BILINEAR (int8): TFLM's fixed-point scales (1/1024ths of an input row or column).
struct BilinearStage {
  int32_t scale_y, scale_x;
  int32_t half_pixel_centers;
};

// MEAN over height and width (tinyseg_stream_reduce.cc): TFLM's requantization with 1/count
// folded in (int8), the count, and where its sums start in op_scratch (int32 units).
struct MeanStage {
  int32_t input_offset, output_offset;
  int32_t multiplier;
  int shift;
  int32_t count;
  int32_t accumulator;
};

// How output row y of a stage maps to input rows (tinyseg::RowMap without the heights): set by
// the family's Prepare. The anchor is (y * num + offset) / den, floored.
struct RowRule {
  int32_t num, den, offset, before, after;
};

// One stage: what every stage has, then its family's state.
struct StageSlot {
  StageOp op;
  int16_t entry;  // index into kStages
  // 0: its inputs have the output's height (elementwise); 1: the row rule maps rows (a
  // convolution, a pool, PAD, a resize), set by the family's Prepare with the rule
  int16_t resamples;
  int32_t operand_begin;  // into the operand pool
  int32_t operand_count;
  int32_t input;   // first activation input (local id)
  int32_t output;  // local id
  RowRule rule;
  union {
    ConvStage conv;
    PoolStage pool;
    ArithmeticStage arith;
    QuantizeStage quantize;
    SigmoidStage sigmoid;
    ReluStage relu;
    HardSwishStage hard_swish;
    LeakyReluStage leaky_relu;
    PreluStage prelu;
    LookupStage lookup;
    PadStage pad;
    ResizeStage resize;
    BilinearStage bilinear;
    MeanStage mean;
  };
};
static_assert(contract::kNumStageKeys <= INT16_MAX, "StageSlot::entry is an int16_t");
static_assert(sizeof(StageSlot) <= contract::kStreamStageBytes,
              "contract: StreamChain stage record");

// The record of every plain constant (a constant node input no stage reads as an activation:
// filters, biases, paddings, alphas). Their stages read them through the node, so they share this
// one, read-only: no rows, no ring, never fetched, spilled, sourced or sunk.
extern const TensorSlot kPlainConstant;

// Pointers into the persistent block (the order customops.stream_chain_body_bytes sums).
struct Tables {
  uint8_t* streams;  // spilled * kSpillStreamBytes
  uint8_t* tensors;  // num_slots * kStreamTensorBytes
  ::tinyseg::ChainTensor* schedule;
  uint8_t* stages;  // num_stages * kStreamStageBytes
  ::tinyseg::ChainEdge* edges;
  int32_t* done;
  int32_t* held;
  int32_t* slots;  // per record: its TensorSlot in `tensors`; -1: a plain constant
  ::tinyseg::ChainStage* chain_stages;
  int32_t* operands;
  int32_t* order;
  int32_t* per_channel;

  // Record i (0 .. num_tensors - 1) to read.
  const TensorSlot& tensor(int32_t i) const {
    const TensorSlot* s = slot(i);
    return s != nullptr ? *s : kPlainConstant;
  }
  // Record i to write: nullptr for a plain constant, whose record is shared and read-only.
  TensorSlot* slot(int32_t i) const {
    const int32_t k = slots[i];
    return k < 0 ? nullptr
                 : reinterpret_cast<TensorSlot*>(tensors + static_cast<size_t>(k) *
                                                               contract::kStreamTensorBytes);
  }
  StageSlot& stage(int32_t i) const {
    return *reinterpret_cast<StageSlot*>(stages +
                                         static_cast<size_t>(i) * contract::kStreamStageBytes);
  }
  ::tinyseg::SpillStream& stream(int32_t i) const {
    return *reinterpret_cast<::tinyseg::SpillStream*>(streams + static_cast<size_t>(i) *
                                                                    contract::kSpillStreamBytes);
  }
};

// ------------------------------------------------------------ the stage families' interface

// A stage's common options, range-checked (contract::kFieldLimits) for every stage.
struct StageFields {
  int32_t stride_h, stride_w, dilation_h, dilation_w;
  TfLitePadding padding;
  TfLiteFusedActivation activation;  // 0..3: NONE..RELU6
};

// What a family's Prepare reads besides its slot.
struct StageArgs {
  TfLiteContext* context;
  TfLiteNode* node;
  const StreamOpData* d;
  const Tables* tab;
  int32_t index;
  const flexbuffers::Map* fields;
  const flexbuffers::Map* stage;  // the stage's map in the options (its "quant" table)
  StageFields f;
  int32_t first_edge, end_edge;  // the stage's schedule edges (its distinct activation inputs)
  int32_t* pool_next;            // next free int32 of the pool
};

struct EvalState {
  TfLiteContext* context;
  TfLiteNode* node;
  const StreamOpData* d;
  Tables tab;
  ::tinyseg::Runtime* rt;
  ::tinyseg::ChainSchedule* schedule;
  int32_t* op_scratch;
  ::tinyseg::RuntimeStats* stats;  // nullptr: no runtime attached (a chain without row streams)
  mutable bool row_io_failed;      // a row source or sink failed (not the storage)
};

// One output row of a stage: row y, the band of its first input (rows lo.., `rows` of them, at
// `src`; rows 0 when the window reads only padding) and the destination row.
struct StageRow {
  int32_t y;
  int32_t lo;
  int32_t rows;
  const uint8_t* src;
  uint8_t* dst;
  const TensorSlot* in;
  const TensorSlot* out;
  RuntimeShape in_shape;   // 1 x rows x W x C
  RuntimeShape out_shape;  // 1 x 1 x W x C
};

// A stage's Prepare and its row function, the two columns of kStages. The families below declare
// theirs by these types, one line per family: `StageRowFunction ConvRow, DepthwiseConvRow;`.
using StagePrepareFunction = TfLiteStatus(const StageArgs& a, StageSlot& g);
using StageRowFunction = ::tinyseg::Status(const EvalState& v, const StageSlot& g,
                                           const StageRow& r);
using StagePrepareFn = StagePrepareFunction*;
using StageRowFn = StageRowFunction*;

// A stage's rows are float32 (its first activation input is float32: the float32 stages and
// QUANTIZE float32 -> int8), int16 (int16 activations with int8 weights, TFLM's 16x8: its first
// activation input or, for QUANTIZE int8 -> int16, its output is int16) or quantized (int8, and
// QUANTIZE/DEQUANTIZE from int8 or uint8).
// The generated contract defines it, beside every (operator, row type) in kStageKeys.
using contract::Rows;

struct StageEntry {
  StageOp op;
  Rows rows;
  StagePrepareFn prepare;
  StageRowFn row;
};

// ------------------------------------------------------------ shared helpers

// FlexBuffers (tinyseg_stream_body.cc).
bool IsVector(const flexbuffers::Reference& r);
size_t VectorSize(const flexbuffers::Reference& r);
flexbuffers::Reference At(const flexbuffers::Reference& r, size_t i);
bool IntIn(const flexbuffers::Reference& r, int64_t lo, int64_t hi, int32_t* out);
bool RecordIn(const TfLiteNode* node, const StreamOpData& d, const flexbuffers::Reference& r,
              int32_t* record);
bool Field(const flexbuffers::Map& fields, const char* key, int32_t fallback, int32_t* out);

// Prepare (tinyseg_stream_body.cc).
uint64_t BodyBytes(const StreamOpData& d);
Tables Layout(const StreamOpData& d);
TfLiteTensor QuantView(const TensorSlot& s);
TfLiteStatus TakePool(TfLiteContext* context, const StreamOpData& d, int64_t count,
                      int32_t* pool_next, int32_t* at);
// A stage reads and writes rows of one type: int16, float32 or (any other `type`) int8; a
// StreamChain refuses the body otherwise.
TfLiteStatus RequireRows(const StageArgs& a, const TensorSlot& out, TfLiteType type);
TfLiteStatus RequireSameShape(TfLiteContext* context, const TensorSlot& in, const TensorSlot& out);
// Rows of `type` (RequireRows) and of the input's shape: the element-wise stages.
TfLiteStatus RequireSameShapeRows(const StageArgs& a, const StageSlot& g, TfLiteType type);
int32_t ConstantOperand(const Tables& tab, const StageSlot& g, int32_t n, bool last);
// Calls `read` with node input `index` as a TfLiteTensor (Prepare's temporary one, released after
// `read`); false, reading nothing, when the node has no such input.
template <typename Read>
bool ReadNodeInput(const StageArgs& a, int32_t index, Read read) {
  if (index < 0 || index >= NumInputs(a.node)) return false;
  MicroContext* mc = GetMicroContext(a.context);
  TfLiteTensor* t = mc->AllocateTempInputTensor(a.node, index);
  if (t == nullptr) return false;
  read(*t);
  mc->DeallocateTempTfLiteTensor(t);
  return true;
}
TfLiteStatus Count(TfLiteContext* context, TfLiteNode* node, StreamOpData* d,
                   const flexbuffers::Map& m);
TfLiteStatus PrepareTensors(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                            const Tables& tab, const flexbuffers::Map& m);
TfLiteStatus PreparePairs(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                          const Tables& tab, const flexbuffers::Map& m);
TfLiteStatus PrepareRowStreams(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                               const Tables& tab, const flexbuffers::Map& m);
// Where the spilled tensors start in `order` (after the node outputs the schedule pulls; the sunk
// tensors follow them).
inline int32_t SpillOrder(const StreamOpData& d) { return d.num_order - d.num_sink - d.spilled; }
TfLiteStatus PrepareStageCommon(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                                const Tables& tab, int32_t index, const flexbuffers::Map& st,
                                int32_t* operand_next, int32_t* edge_next, StageArgs* a);
TfLiteStatus PrepareSchedule(TfLiteContext* context, TfLiteNode* node, const StreamOpData& d,
                             const Tables& tab);
uint32_t SpillSlot(const flexbuffers::Map& m, int32_t stream);
// The storage region of the slot that spilled tensor `id` streams into (Prepare found it).
::tinyseg::SpillManager* StreamStorage(const EvalState& v, int32_t id);

// Eval (tinyseg_stream_eval.cc).
::tinyseg::Status Band(const EvalState& v, int32_t id, int32_t lo, int32_t hi, const uint8_t** out);
::tinyseg::Status Window(const EvalState& v, int32_t stage, int32_t id, int32_t y, int32_t* lo,
                         int32_t* hi);
::tinyseg::Status OutputRow(const EvalState& v, const StageSlot& g, int32_t y, uint8_t** dst);
::tinyseg::Status FetchRow(const EvalState& v, int32_t id, int32_t row);
::tinyseg::Status SinkRow(const EvalState& v, const TensorSlot& s, int32_t row, const uint8_t* src);
TfLiteStatus BeginEval(TfLiteContext* context, TfLiteNode* node, EvalState* v, uint8_t** rings);
TfLiteStatus OpenStreams(const EvalState& v, uint8_t* rings);
// After the schedule ran: the sources' unread rows drained, then the row streams closed.
TfLiteStatus EndEval(const EvalState& v);
// The storage fault hint for a failed run, none when a row source or sink failed.
const char* FaultHint(const EvalState& v, ::tinyseg::Status st);
// The op_scratch bytes the stages take turns with: all but the accumulating stage's sums at its
// end.
inline int32_t MemberScratchBytes(const StreamOpData& d) {
  return d.op_scratch - d.accumulator_bytes;
}
// One row through TFLM's element-wise function `fn`: the input row's shape and elements to the
// output row's, of T elements, with no parameters or with `params` (Out: the output's element
// type where it differs). The caller names T; `fn` may be overloaded.
template <typename T>
::tinyseg::Status MapRow(void (*fn)(const RuntimeShape&, const T*, const RuntimeShape&, T*),
                         const StageRow& r) {
  fn(r.in_shape, reinterpret_cast<const T*>(r.src), r.out_shape, reinterpret_cast<T*>(r.dst));
  return ::tinyseg::Status::kOk;
}
template <typename T, typename Out = T, typename Params>
::tinyseg::Status MapRow(void (*fn)(const Params&, const RuntimeShape&, const T*,
                                    const RuntimeShape&, Out*),
                         const Params& params, const StageRow& r) {
  fn(params, r.in_shape, reinterpret_cast<const T*>(r.src), r.out_shape,
     reinterpret_cast<Out*>(r.dst));
  return ::tinyseg::Status::kOk;
}

// Whether CMSIS-NN computed the row (`optimized`, what a tinyseg_stream_cmsis.h function
// returned), counted in RuntimeStats::optimized_rows when the application attached a
// tinyseg::Runtime.
inline bool OptimizedRow(const EvalState& v, bool optimized) {
  if (optimized && v.stats != nullptr) ++v.stats->optimized_rows;
  return optimized;
}

// ------------------------------------------------------------ the families

StagePrepareFunction PrepareConv;
StageRowFunction ConvRow, DepthwiseConvRow, TransposeConvRow;

// The convolution family's shared Prepare (tinyseg_stream_conv.cc): rows of `rows`, the options,
// then the filter and bias to `with`, which checks their types and computes the parameters;
// ConvGeometry checks the sizes and sets the row rule.
using ConvPrepareWithFn = TfLiteStatus (*)(const StageArgs&, StageSlot&, const TensorSlot&,
                                           const TensorSlot&, TfLiteTensor*, TfLiteTensor*);
TfLiteStatus PrepareConvOf(const StageArgs& a, StageSlot& g, TfLiteType rows,
                           ConvPrepareWithFn with);
// A requantizing stage's input and output offsets, activation range and per-channel multiplier
// and shift: its "quant" table read in place from the options (checked against TFLM's arithmetic),
// or, without one, TFLM's PopulateConvolutionQuantizationParams into the pool.
TfLiteStatus Requantization(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                            const TensorSlot& out, TfLiteTensor* filter, TfLiteTensor* bias);
// multiplier[C], then shift[C] after it, of a stage Requantization prepared.
const int32_t* Multipliers(const EvalState& v, const ConvStage& c);
bool ConvGeometry(const StageArgs& a, StageSlot& g, const TensorSlot& in, const TensorSlot& out,
                  const TfLiteTensor* filter);
// What every form's `with` checks first: a filter of `filter_type` ([C_out, kh, kw, C_in];
// DEPTHWISE_CONV_2D [1, kh, kw, C_out]) and the form's bias rule `bias_ok` (else `refusal` is
// printed), then the geometry (ConvGeometry).
TfLiteStatus FilterAndGeometry(const StageArgs& a, StageSlot& g, const TensorSlot& in,
                               const TensorSlot& out, const TfLiteTensor* filter,
                               TfLiteType filter_type, bool bias_ok, const char* refusal);
// A bias of `type` (or `other`) and one value per output channel.
bool BiasFits(const TfLiteTensor* bias, const TensorSlot& out, TfLiteType type,
              TfLiteType other = kTfLiteNoType);

StagePrepareFunction PrepareConvFloat;
StageRowFunction ConvFloatRow, DepthwiseConvFloatRow, TransposeConvFloatRow;

// The pool family's geometry and row rule (tinyseg_stream_pool.cc).
StagePrepareFunction PoolGeometry, PreparePool, PreparePoolFloat;
StageRowFunction MaxPoolRow, AveragePoolRow, MaxPoolFloatRow, AveragePoolFloatRow;

// ADD/SUB/MUL operands broadcast to the output (tinyseg_stream_arithmetic.cc); constants of `type`.
TfLiteStatus CheckOperands(const StageArgs& a, const StageSlot& g, const TensorSlot& out,
                           TfLiteType type);
StagePrepareFunction PrepareArithmetic;
// A MUL operand read whole from the arena, not streamed (no schedule edge): a StreamChain input of
// one pixel (1 x 1 x 1 x C, int8, float32 or int16) while the other operand is an activation that
// is not, a squeeze-and-excitation gate broadcast over the rows. WholeCandidate: the first
// condition; WholeIndex: which operand (0, 1) is read whole given each one's candidacy and
// constancy, -1: none.
bool WholeCandidate(StageOp op, const TensorSlot& x);
bool WholeCandidate(StageOp op, const TfLiteTensor& t);
int32_t WholeIndex(const bool candidate[2], const bool constant[2]);
bool ReadWhole(const Tables& tab, const StageSlot& g, int32_t k);
StagePrepareFunction PrepareArithmeticFloat;
StageRowFunction ArithmeticRow, ArithmeticFloatRow;

// QUANTIZE, DEQUANTIZE and the activations (tinyseg_stream_activation.cc). The Prepare named
// Quantized serves int8 and int16 rows.
StagePrepareFunction PrepareQuantize, PrepareDequantize, PrepareQuantizeFloat;
StageRowFunction QuantizeRow, DequantizeRow, QuantizeFloatRow;
StagePrepareFunction PrepareSameShapeFloat, PrepareSigmoid, PrepareRelu, PrepareRelu6;
StageRowFunction ReluFloatRow, Relu6FloatRow, LogisticFloatRow, LogisticRow, TanhRow, ReluRow,
    Relu6Row;
StagePrepareFunction PrepareHardSwish, PrepareElu;
StageRowFunction HardSwishRow, EluRow;
StagePrepareFunction PrepareLeakyRelu, PrepareLeakyReluQuantized, PreparePrelu,
    PreparePreluQuantized;
// LEAKY_RELU's alpha, the stage's field (as leaky_relu.cc takes it from its builtin options).
StagePrepareFunction PrepareLeakyReluAlpha;
// PRELU's alpha, operand 1: a constant node input (its index into the stage) of one row
// (broadcast along height) and of `type` (`ok`), its quantization into `q`.
TfLiteStatus PreluAlpha(const StageArgs& a, StageSlot& g, TfLiteType type, bool* ok,
                        TfLiteQuantizationParams* q);
StageRowFunction LeakyReluRow, PreluRow;

StagePrepareFunction PreparePad, PrepareResizeBilinear;
StageRowFunction PadRow, ResizeRow;
// RESIZE_BILINEAR's rows of `type`, and its align_corners and half_pixel_centers fields (not
// both, as TFLM refuses).
TfLiteStatus BilinearFlags(const StageArgs& a, const StageSlot& g, TfLiteType type, bool* align,
                           bool* half);
StagePrepareFunction PreparePadFloat;
StageRowFunction ResizeBilinearRow, ConcatenationRow, PadFloatRow, ResizeFloatRow;

// The float32 stages of tinyseg_stream_float.cc (and PADV2 of tinyseg_stream_layout.cc).
StagePrepareFunction PrepareEluFloat, PrepareLeakyReluFloat, PreparePreluFloat;
StageRowFunction TanhFloatRow, HardSwishFloatRow, EluFloatRow, LeakyReluFloatRow, PreluFloatRow;
bool BilinearFloatRule(int32_t in_h, int32_t out_h, bool align, bool half, RowRule* rule);
StagePrepareFunction PrepareResizeBilinearFloat, PreparePadv2Float;
StageRowFunction ResizeBilinearFloatRow;
// MEAN over height and width, the last stage of its chain (tinyseg_stream_reduce.cc).
StagePrepareFunction PrepareMean, PrepareMeanFloat, PrepareMeanInt16;
StageRowFunction MeanRow, MeanFloatRow, MeanInt16Row;
// The Prepare of a stage whose parameters are the same for every row type (the layout stages,
// which move bytes): the rows' type, then `kPrepare`. kStages names one per row type.
template <TfLiteType kType, StagePrepareFn kPrepare>
TfLiteStatus TypedPrepare(const StageArgs& a, StageSlot& g) {
  TF_LITE_ENSURE_STATUS(RequireRows(a, a.tab->tensor(g.output), kType));
  return kPrepare(a, g);
}
// RESIZE_NEAREST_NEIGHBOR by an integer factor (row y reads y / factor) and CONCATENATION along
// channels: the checks and row rules every row type shares (_layout.cc).
StagePrepareFunction ResizeGeometry, ConcatenationGeometry;
constexpr StagePrepareFn PrepareResize = TypedPrepare<kTfLiteInt8, ResizeGeometry>;
constexpr StagePrepareFn PrepareResizeFloat = TypedPrepare<kTfLiteFloat32, ResizeGeometry>;
constexpr StagePrepareFn PrepareResizeInt16 = TypedPrepare<kTfLiteInt16, ResizeGeometry>;
constexpr StagePrepareFn PrepareConcatenation = TypedPrepare<kTfLiteInt8, ConcatenationGeometry>;
constexpr StagePrepareFn PrepareConcatenationFloat =
    TypedPrepare<kTfLiteFloat32, ConcatenationGeometry>;
constexpr StagePrepareFn PrepareConcatenationInt16 =
    TypedPrepare<kTfLiteInt16, ConcatenationGeometry>;
// ADD's and SUB's three multipliers (input 1, input 2, output) into `ar`, or false where TFLM's
// QuantizeMultiplierSmallerThanOneExp would abort on one (_arithmetic.cc); Prepare then refuses
// with TINYSEG_ADD_SUB_SCALES (a literal: older TFLM's TF_LITE_ENSURE_MSG takes no arguments).
bool AddSubMultipliers(const double (&m)[3], ArithmeticStage& ar);
#define TINYSEG_ADD_SUB_SCALES                                                                \
  "StreamChain: an ADD or SUB stage's scales give a multiplier outside (0, 1), which TFLM's " \
  "ADD and SUB cannot take"
// int16 rows (TFLM's 16x8 reference arithmetic): convolution and pooling
// (tinyseg_stream_int16.cc), ADD, SUB and MUL, PAD (_layout.cc), the activations
// (_int16_more.cc).
StagePrepareFunction PrepareConvInt16, PreparePoolInt16, PrepareArithmeticInt16, PreparePadInt16;
StageRowFunction ConvInt16Row, DepthwiseConvInt16Row, MaxPoolInt16Row, AveragePoolInt16Row,
    ArithmeticInt16Row, PadInt16Row, ResizeInt16Row;
StagePrepareFunction PrepareSigmoidInt16, PrepareLeakyReluInt16, PreparePreluInt16,
    PrepareReluInt16, PrepareRelu6Int16;
StageRowFunction LogisticInt16Row, TanhInt16Row, LeakyReluInt16Row, PreluInt16Row, ReluInt16Row,
    Relu6Int16Row;
// TRANSPOSE_CONV (int64 accumulator row in op_scratch; an int64, int16 or no bias) and PADV2
// (tinyseg_stream_int16_tconv.cc).
StagePrepareFunction PrepareTransposeConvInt16, PreparePadv2Int16;
StageRowFunction TransposeConvInt16Row;
// PADV2's pad value (input ps.value): a constant scalar of the rows' type (int8: of the output's
// quantization, as pad.cc checks; int16 and float32 read as they are) into ps.
TfLiteStatus PadValue(const StageArgs& a, const TensorSlot& out, PadStage& ps);

}  // namespace tinyseg_stream
}  // namespace tflite

#endif  // TENSORFLOW_LITE_MICRO_KERNELS_TINYSEG_TINYSEG_STREAM_INTERNAL_H_
