// The pull schedule of a streamed chain: which operator computes
// which row next, so that every row is computed exactly once and each ring
// holds only the rows its readers' windows still need.
//
// This is the C++ side of tinyseg_plugin/transforms/stream.py `simulate`: the planner
// sizes each ring with the Python schedule, the kernel follows this one, and
// tests/test_stream_native.py runs both on the same chains and checks that
// they produce the same rows in the same order with the same ring sizes.
//
// Rows: output row y of a stage reads rows [lo, hi] of an input through a
// RowMap: anchor = floor((y * num + offset) / den), lo = max(anchor - before,
// 0), hi = min(anchor + after, in_h - 1) (band.h's arithmetic for windows; up-
// sampling by f is num = 1, den = f; PAD's top rows are before = -top; a
// half-pixel resize's shift is the offset).
//
// The schedule: the chain's outputs, in the order given, get one row each in
// turn until all are complete; a row is computed when a reader's window first
// needs it (pulling its own inputs first). A tensor's ring holds rows from the
// lowest row a reader's next output row reads up to the last row produced.
// No heap; recursion depth is at most the number of stages.
#ifndef TINYSEG_CHAIN_SCHEDULE_H_
#define TINYSEG_CHAIN_SCHEDULE_H_

#include <cstddef>
#include <cstdint>

#include "tinyseg/status.h"

namespace tinyseg {

struct RowMap {
  int32_t in_h = 0;
  int32_t num = 1;
  int32_t den = 1;
  int32_t offset = 0;
  int32_t before = 0;
  int32_t after = 0;
};

// Input rows [*lo, *hi] output row y reads; *lo > *hi when it reads none.
void RowWindow(const RowMap& m, int32_t y, int32_t* lo, int32_t* hi);

struct ChainTensor {
  int32_t height = 0;
  int32_t producer = -1;  // stage that computes it; -1: a chain input
  bool streamed = false;  // produced row by row (every produced tensor; fetched inputs)
  int32_t ring_rows = 0;  // rows its ring holds; 0: no ring (whole in the arena, or no reader)
};

struct ChainStage {
  int32_t output = 0;  // tensor index
};

// Stage `stage` reads tensor `tensor` through `map` (one edge per distinct input).
struct ChainEdge {
  int32_t stage = 0;
  int32_t tensor = 0;
  RowMap map;
};

// Per-tensor and per-stage counters the schedule keeps (caller-owned, sized
// to the chain).
struct ChainState {
  int32_t* done = nullptr;      // [tensors] rows produced so far
  int32_t* held_max = nullptr;  // [tensors] most rows a ring held (measured)
};

class ChainSchedule {
 public:
  // The arrays must outlive the schedule. Edges must be listed per stage in
  // the stage's input order (the order rows are pulled in).
  Status Init(const ChainTensor* tensors, int32_t num_tensors, const ChainStage* stages,
              int32_t num_stages, const ChainEdge* edges, int32_t num_edges, const int32_t* outputs,
              int32_t num_outputs, ChainState state);

  // Runs the whole schedule. compute(stage, row) is called once per output
  // row of every stage, after the rows it reads are available; a non-ok
  // Status from it stops the run. kOutOfRange if a ring would need more rows
  // than its ring_rows (the plan and the schedule disagree).
  template <typename Compute>
  Status Run(Compute&& compute);
  // The same, with source(tensor, row) called for each row of a streamed
  // chain input (a tensor fetched from storage row by row) when it is first
  // needed, in order.
  template <typename Compute, typename Source>
  Status Run(Compute&& compute, Source&& source);

  // The lowest row of `tensor` some reader's next output row reads (its
  // height when none will): rows below it may leave its ring.
  int32_t lowest_needed(int32_t tensor) const;

 private:
  template <typename Compute, typename Source>
  Status Pull(int32_t tensor, int32_t row, Compute& compute, Source& source, int32_t depth);
  Status Note(int32_t tensor);

  const ChainTensor* tensors_ = nullptr;
  const ChainStage* stages_ = nullptr;
  const ChainEdge* edges_ = nullptr;
  const int32_t* outputs_ = nullptr;
  int32_t num_tensors_ = 0, num_stages_ = 0, num_edges_ = 0, num_outputs_ = 0;
  ChainState state_;
};

template <typename Compute, typename Source>
Status ChainSchedule::Pull(int32_t t, int32_t row, Compute& compute, Source& source,
                           int32_t depth) {
  if (depth > num_stages_) return Status::kInvalidArgument;  // a cycle
  const int32_t s = tensors_[t].producer;
  while (state_.done[t] <= row) {
    if (s < 0) {
      TINYSEG_RETURN_IF_ERROR(source(t, state_.done[t]));
    } else {
      const int32_t y = state_.done[t];
      for (int32_t e = 0; e < num_edges_; ++e) {
        if (edges_[e].stage != s || !tensors_[edges_[e].tensor].streamed) continue;
        int32_t lo, hi;
        RowWindow(edges_[e].map, y, &lo, &hi);
        if (lo <= hi) {
          TINYSEG_RETURN_IF_ERROR(Pull(edges_[e].tensor, hi, compute, source, depth + 1));
        }
      }
      TINYSEG_RETURN_IF_ERROR(compute(s, y));
    }
    state_.done[t] += 1;
    TINYSEG_RETURN_IF_ERROR(Note(t));
    if (s >= 0) {
      for (int32_t e = 0; e < num_edges_; ++e) {
        if (edges_[e].stage == s) TINYSEG_RETURN_IF_ERROR(Note(edges_[e].tensor));
      }
    }
  }
  return Status::kOk;
}

template <typename Compute>
Status ChainSchedule::Run(Compute&& compute) {
  return Run(compute, [](int32_t, int32_t) { return Status::kOk; });
}

template <typename Compute, typename Source>
Status ChainSchedule::Run(Compute&& compute, Source&& source) {
  bool progress = true;
  while (progress) {
    progress = false;
    for (int32_t k = 0; k < num_outputs_; ++k) {
      const int32_t t = outputs_[k];
      if (state_.done[t] < tensors_[t].height) {
        TINYSEG_RETURN_IF_ERROR(Pull(t, state_.done[t], compute, source, 0));
        progress = true;
      }
    }
  }
  for (int32_t s = 0; s < num_stages_; ++s) {  // a tensor no output needs is still computed
    const int32_t t = stages_[s].output;
    if (state_.done[t] < tensors_[t].height) {
      TINYSEG_RETURN_IF_ERROR(Pull(t, tensors_[t].height - 1, compute, source, 0));
    }
  }
  return Status::kOk;
}

}  // namespace tinyseg

#endif  // TINYSEG_CHAIN_SCHEDULE_H_
