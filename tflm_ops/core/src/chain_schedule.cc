// The pull schedule of a streamed chain (see chain_schedule.h).
#include "tinyseg/chain_schedule.h"

namespace tinyseg {

namespace {

// Floor division for the anchor (rows are never negative here, but PAD's
// anchors and windows may start above the image).
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

void RowWindow(const RowMap& m, int32_t y, int32_t* lo, int32_t* hi) {
  const int64_t anchor = FloorDiv(static_cast<int64_t>(y) * m.num + m.offset, m.den);
  int64_t a = anchor - m.before;
  int64_t b = anchor + m.after;
  if (a < 0) a = 0;
  if (b > m.in_h - 1) b = m.in_h - 1;
  *lo = static_cast<int32_t>(a);
  *hi = static_cast<int32_t>(b);
}

Status ChainSchedule::Init(const ChainTensor* tensors, int32_t num_tensors,
                           const ChainStage* stages, int32_t num_stages, const ChainEdge* edges,
                           int32_t num_edges, const int32_t* outputs, int32_t num_outputs,
                           ChainState state) {
  if (tensors == nullptr || stages == nullptr || state.done == nullptr ||
      state.held_max == nullptr || num_tensors <= 0 || num_stages <= 0 || num_edges < 0 ||
      num_outputs < 0 || (num_edges > 0 && edges == nullptr) ||
      (num_outputs > 0 && outputs == nullptr)) {
    return Status::kInvalidArgument;
  }
  for (int32_t s = 0; s < num_stages; ++s) {
    const int32_t t = stages[s].output;
    if (t < 0 || t >= num_tensors || tensors[t].producer != s || !tensors[t].streamed) {
      return Status::kInvalidArgument;
    }
  }
  for (int32_t e = 0; e < num_edges; ++e) {
    const ChainEdge& x = edges[e];
    if (x.stage < 0 || x.stage >= num_stages || x.tensor < 0 || x.tensor >= num_tensors ||
        x.map.num <= 0 || x.map.den <= 0 || x.map.in_h != tensors[x.tensor].height) {
      return Status::kInvalidArgument;
    }
  }
  for (int32_t k = 0; k < num_outputs; ++k) {
    if (outputs[k] < 0 || outputs[k] >= num_tensors || tensors[outputs[k]].producer < 0) {
      return Status::kInvalidArgument;
    }
  }
  tensors_ = tensors;
  stages_ = stages;
  edges_ = edges;
  outputs_ = outputs;
  num_tensors_ = num_tensors;
  num_stages_ = num_stages;
  num_edges_ = num_edges;
  num_outputs_ = num_outputs;
  state_ = state;
  for (int32_t t = 0; t < num_tensors; ++t) {
    state_.done[t] = 0;
    state_.held_max[t] = 0;
  }
  return Status::kOk;
}

int32_t ChainSchedule::lowest_needed(int32_t t) const {
  int32_t low = tensors_[t].height;
  for (int32_t e = 0; e < num_edges_; ++e) {
    if (edges_[e].tensor != t) continue;
    const int32_t out = stages_[edges_[e].stage].output;
    const int32_t y = state_.done[out];
    if (y < tensors_[out].height) {
      int32_t lo, hi;
      RowWindow(edges_[e].map, y, &lo, &hi);
      const int32_t first = lo <= hi ? lo : tensors_[t].height;
      if (first < low) low = first;
    }
  }
  return low;
}

Status ChainSchedule::Note(int32_t t) {
  if (tensors_[t].ring_rows <= 0) return Status::kOk;
  int32_t low = lowest_needed(t);
  if (low > state_.done[t]) low = state_.done[t];
  const int32_t held = state_.done[t] - low;
  if (held > state_.held_max[t]) state_.held_max[t] = held;
  return held > tensors_[t].ring_rows ? Status::kOutOfRange : Status::kOk;
}

}  // namespace tinyseg
