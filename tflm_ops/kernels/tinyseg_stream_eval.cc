// StreamChain's row plumbing at Eval (tinyseg_stream_internal.h): band views of a tensor's rows
// (node tensors in place, body tensors in their RowRing), the window a stage reads, the row a stage
// writes, fetched rows decoded into their ring, sourced rows read into it, sunk rows handed out,
// token outputs zeroed, and the spilled tensors' row streams.
#include <cstring>
#include <new>

#include "tensorflow/lite/c/common.h"
#include "tensorflow/lite/micro/kernels/kernel_util.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_common.h"
#include "tensorflow/lite/micro/kernels/tinyseg/tinyseg_stream_internal.h"
#include "tensorflow/lite/micro/memory_helpers.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tinyseg/chain_schedule.h"

namespace tflite {
namespace tinyseg_stream {
namespace {

uint8_t* NodeData(const EvalState& v, int32_t id) {
  const int index = NodeIndex(v.node, *v.d, id);
  const TfLiteEvalTensor* t = v.tab.tensor(id).kind == Kind::kNodeInput
                                  ? micro::GetEvalInput(v.context, v.node, index)
                                  : micro::GetEvalOutput(v.context, v.node, index);
  return t == nullptr ? nullptr : static_cast<uint8_t*>(t->data.data);
}

}  // namespace

// Rows [lo, hi] of a local tensor as one contiguous block (a band view).
::tinyseg::Status Band(const EvalState& v, int32_t id, int32_t lo, int32_t hi,
                       const uint8_t** out) {
  const TensorSlot& s = v.tab.tensor(id);
  if (lo > hi) {  // the window reads only padding: any valid pointer, zero rows
    *out = reinterpret_cast<const uint8_t*>(&s);
    return ::tinyseg::Status::kOk;
  }
  if (s.kind != Kind::kBody) {
    const uint8_t* base = NodeData(v, id);
    if (base == nullptr || lo < 0 || hi >= s.height) return ::tinyseg::Status::kOutOfRange;
    *out = base + static_cast<size_t>(lo) * static_cast<size_t>(s.row_bytes);
    return ::tinyseg::Status::kOk;
  }
  return s.ring.Rows(lo, hi, out);
}

::tinyseg::Status Window(const EvalState& v, int32_t stage, int32_t id, int32_t y, int32_t* lo,
                         int32_t* hi) {
  for (int32_t e = 0; e < v.d->num_edges; ++e) {
    const ::tinyseg::ChainEdge& edge = v.tab.edges[e];
    if (edge.stage == stage && edge.tensor == id) {
      ::tinyseg::RowWindow(edge.map, y, lo, hi);
      return ::tinyseg::Status::kOk;
    }
  }
  return ::tinyseg::Status::kInvalidArgument;
}

// Where the stage writes output row y: the node output in place, or a row reserved in its ring
// (dropping the rows no reader needs any more).
::tinyseg::Status OutputRow(const EvalState& v, const StageSlot& g, int32_t y, uint8_t** dst) {
  TensorSlot* slot = v.tab.slot(g.output);  // Prepare: a node output or a body tensor
  if (slot == nullptr) return ::tinyseg::Status::kInvalidArgument;
  TensorSlot& out = *slot;
  if (out.kind == Kind::kNodeOutput) {
    uint8_t* base = NodeData(v, g.output);
    if (base == nullptr) return ::tinyseg::Status::kInvalidArgument;
    // An accumulating stage's steps are its input's rows; it writes its one row at the last.
    const int32_t row = contract::AccumulatingStage(g.op) ? 0 : y;
    *dst = base + static_cast<size_t>(row) * static_cast<size_t>(out.row_bytes);
    return ::tinyseg::Status::kOk;
  }
  int32_t keep = v.schedule->lowest_needed(g.output);
  if (keep > y) keep = y;
  return out.ring.Reserve(y, keep, dst);
}

namespace {

// Row `row` of a sourced tensor into its ring: exactly its row bytes from the Runtime's source.
::tinyseg::Status SourceRow(const EvalState& v, TensorSlot& s, uint8_t* dst, int32_t row) {
  const ::tinyseg::RowSource& source = v.rt->sources[s.source];  // Prepare checked the index
  const size_t bytes = static_cast<size_t>(s.row_bytes);
  size_t written = 0;
  const ::tinyseg::Status st = source.read == nullptr
                                   ? ::tinyseg::Status::kInvalidArgument
                                   : source.read(source.user, s.source, row, dst, bytes, &written);
  v.row_io_failed = !::tinyseg::Ok(st) || written != bytes;
  if (!::tinyseg::Ok(st)) {
    MicroPrintf("StreamChain: the row source of graph input %d failed at row %d: %s",
                static_cast<int>(s.source), static_cast<int>(row), ::tinyseg::StatusName(st));
    return st;
  }
  if (written != bytes) {
    MicroPrintf(
        "StreamChain: the row source of graph input %d delivered %u bytes of row %d, not %u",
        static_cast<int>(s.source), static_cast<unsigned>(written), static_cast<int>(row),
        static_cast<unsigned>(bytes));
    return ::tinyseg::Status::kOutOfRange;
  }
  ++v.rt->stats.source_rows;
  return ::tinyseg::Status::kOk;
}

}  // namespace

::tinyseg::Status FetchRow(const EvalState& v, int32_t id, int32_t row) {
  TensorSlot* slot = v.tab.slot(id);
  if (slot == nullptr || (slot->fetch_slot < 0 && slot->source < 0)) {
    return ::tinyseg::Status::kInvalidArgument;
  }
  TensorSlot& s = *slot;
  int32_t keep = v.schedule->lowest_needed(id);
  if (keep > row) keep = row;
  uint8_t* dst = nullptr;
  TINYSEG_RETURN_IF_ERROR(s.ring.Reserve(row, keep, &dst));
  if (s.source >= 0) return SourceRow(v, s, dst, row);
  const size_t bytes = static_cast<size_t>(s.row_bytes);
  // BeginEval's CheckSlot found the slot's storage.
  const ::tinyseg::Status st = v.rt->storage(s.fetch_region)
                                   ->FetchRange(static_cast<uint32_t>(s.fetch_slot),
                                                static_cast<size_t>(row) * bytes, bytes, dst);
  if (!::tinyseg::Ok(st)) {
    MicroPrintf("StreamChain: fetching row %d of slot %u failed: %s%s", static_cast<int>(row),
                static_cast<unsigned>(s.fetch_slot), ::tinyseg::StatusName(st),
                tinyseg_ops::StorageFaultHint(st));
    return st;
  }
  ++v.rt->stats.fetches;
  v.rt->stats.fetched_bytes += bytes;
  return ::tinyseg::Status::kOk;
}

// A finished row of a sunk tensor to the Runtime's sink.
::tinyseg::Status SinkRow(const EvalState& v, const TensorSlot& s, int32_t row,
                          const uint8_t* src) {
  const ::tinyseg::RowSink& sink = v.rt->sinks[s.sink];  // Prepare checked the index
  const ::tinyseg::Status st = sink.write == nullptr ? ::tinyseg::Status::kInvalidArgument
                                                     : sink.write(sink.user, s.sink, row, src,
                                                                  static_cast<size_t>(s.row_bytes));
  if (!::tinyseg::Ok(st)) {
    v.row_io_failed = true;
    MicroPrintf("StreamChain: the row sink of graph output %d failed at row %d: %s",
                static_cast<int>(s.sink), static_cast<int>(row), ::tinyseg::StatusName(st));
    return st;
  }
  ++v.rt->stats.sink_rows;
  return ::tinyseg::Status::kOk;
}

namespace {

// The rows of each sourced tensor the chain did not read (a VALID or strided window stops short of
// the bottom): read and dropped, so that a source gives every row of its input once per inference.
::tinyseg::Status DrainSources(const EvalState& v) {
  for (int32_t i = 0; i < v.d->num_tensors && v.d->num_source > 0; ++i) {
    const TensorSlot& s = v.tab.tensor(i);
    if (s.source < 0) continue;
    for (int32_t row = v.tab.done[i]; row < s.height; ++row) {
      TINYSEG_RETURN_IF_ERROR(FetchRow(v, i, row));
      v.tab.done[i] = row + 1;
    }
  }
  return ::tinyseg::Status::kOk;
}

// Token outputs carry no data: zeros, whatever their type and size.
TfLiteStatus ZeroTokens(const EvalState& v) {
  const int n_out = v.node->outputs->size;
  for (int k = n_out - v.d->out_tokens; k < n_out; ++k) {
    TfLiteEvalTensor* t = micro::GetEvalOutput(v.context, v.node, k);
    size_t bytes = 0;
    TF_LITE_ENSURE(v.context, t != nullptr);
    TF_LITE_ENSURE_STATUS(TfLiteEvalTensorByteLength(t, &bytes));
    if (bytes > 0) std::memset(t->data.data, 0, bytes);
  }
  return kTfLiteOk;
}

}  // namespace

// The eval state: the runtime (when the chain spills or fetches), the scratch buffers, the rings
// over them and every fetched slot checked.
TfLiteStatus BeginEval(TfLiteContext* context, TfLiteNode* node, EvalState* v, uint8_t** rings) {
  const auto* d = static_cast<const StreamOpData*>(node->user_data);
  v->context = context;
  v->node = node;
  v->d = d;
  v->tab = Layout(*d);
  v->rt = nullptr;
  v->schedule = nullptr;
  v->row_io_failed = false;
  if (d->spilled > 0 || d->fetched > 0 || d->num_source > 0 || d->num_sink > 0) {
    v->rt = tinyseg_ops::GetRuntime(context, kOp);
    if (v->rt == nullptr) return kTfLiteError;
  }
  *rings = d->ring_index >= 0
               ? static_cast<uint8_t*>(context->GetScratchBuffer(context, d->ring_index))
               : nullptr;
  TF_LITE_ENSURE(context, *rings != nullptr || (d->ring_bytes == 0 && d->spilled == 0));
  v->op_scratch =
      d->op_scratch > 0
          ? static_cast<int32_t*>(context->GetScratchBuffer(context, d->op_scratch_index))
          : nullptr;
  TF_LITE_ENSURE_STATUS(ZeroTokens(*v));
  ::tinyseg::Runtime* attached = tinyseg_ops::PeekRuntime(context);
  v->stats = attached != nullptr ? &attached->stats : nullptr;
  for (int32_t i = 0; i < d->num_tensors; ++i) {
    if (v->tab.slot(i) == nullptr) continue;  // a plain constant: no ring, never fetched
    TensorSlot& ts = *v->tab.slot(i);
    if (ts.ring_rows > 0) {
      TF_LITE_ENSURE(context, ::tinyseg::Ok(ts.ring.Init(*rings + ts.ring_offset, ts.ring_rows,
                                                         static_cast<size_t>(ts.row_bytes))));
    }
    if (ts.fetch_slot >= 0) {
      const size_t raw = static_cast<size_t>(ts.height) * static_cast<size_t>(ts.row_bytes);
      TF_LITE_ENSURE_STATUS(tinyseg_ops::CheckSlot(*v->rt, ts.fetch_region,
                                                   static_cast<uint32_t>(ts.fetch_slot), raw, kOp));
    }
  }
  return kTfLiteOk;
}

// One row stream per spilled tensor, its codec block after the rings.
TfLiteStatus OpenStreams(const EvalState& v, uint8_t* rings) {
  const StreamOpData* d = v.d;
  const flexbuffers::Map m = flexbuffers::GetRoot(d->options, d->options_bytes).AsMap();
  for (int32_t k = 0; k < d->spilled; ++k) {
    const int32_t id = v.tab.order[SpillOrder(*d) + k];
    const TensorSlot& s = v.tab.tensor(id);
    uint8_t* accumulator =
        rings + d->ring_bytes + static_cast<size_t>(k) * static_cast<size_t>(d->block);
    ::tinyseg::SpillManager* storage =
        tinyseg_ops::RegionStorage(*v.rt, s.spill_region, SpillSlot(m, k), kOp);
    if (storage == nullptr) return kTfLiteError;
    const ::tinyseg::Status st = storage->BeginStream(
        SpillSlot(m, k), static_cast<size_t>(s.height) * static_cast<size_t>(s.row_bytes), 1,
        accumulator, new (&v.tab.stream(k))::tinyseg::SpillStream(),
        static_cast<uint32_t>(d->block));
    if (!::tinyseg::Ok(st)) {
      MicroPrintf("StreamChain: opening the row stream of slot %u failed: %s",
                  static_cast<unsigned>(SpillSlot(m, k)), ::tinyseg::StatusName(st));
      return kTfLiteError;
    }
  }
  return kTfLiteOk;
}

::tinyseg::SpillManager* StreamStorage(const EvalState& v, int32_t id) {
  return v.rt->storage(v.tab.tensor(id).spill_region);  // OpenStreams found it
}

namespace {

TfLiteStatus CloseStreams(const EvalState& v) {
  for (int32_t k = 0; k < v.d->spilled; ++k) {
    ::tinyseg::SpillStream& stream = v.tab.stream(k);
    const int32_t id = v.tab.order[SpillOrder(*v.d) + k];
    const ::tinyseg::Status end = StreamStorage(v, id)->EndStream(&stream);
    if (!::tinyseg::Ok(end)) {
      MicroPrintf("StreamChain: closing the row stream of slot %u failed: %s%s",
                  static_cast<unsigned>(stream.slot), ::tinyseg::StatusName(end),
                  tinyseg_ops::StorageFaultHint(end));
      return kTfLiteError;
    }
    ++v.rt->stats.spills;
    v.rt->stats.spilled_bytes += stream.total;
  }
  return kTfLiteOk;
}

}  // namespace

const char* FaultHint(const EvalState& v, ::tinyseg::Status st) {
  return v.row_io_failed ? "" : tinyseg_ops::StorageFaultHint(st);
}

TfLiteStatus EndEval(const EvalState& v) {
  if (!::tinyseg::Ok(DrainSources(v))) return kTfLiteError;  // SourceRow said why
  return CloseStreams(v);
}

}  // namespace tinyseg_stream
}  // namespace tflite
