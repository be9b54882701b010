// Reads a chain's schedule program on stdin and prints the rows the C++ pull
// schedule computes, in order, and the rows each ring held at most, so that
// tests/test_stream.py can compare them with tinyseg_plugin/transforms/stream.py's
// `simulate` (the planner sizes rings with the Python schedule; the kernel will
// follow this one).
//
// Input (whitespace-separated integers):
//   T  then T lines: height producer streamed ring_rows
//   S  then S lines: output_tensor
//   E  then E lines: stage tensor in_h num den offset before after
//   O  then O tensor indices (the outputs, in the order rows are asked for)
// Output: "step STAGE ROW" per computed row, then "held TENSOR ROWS" per tensor,
// then "status NAME".
#include <cstdio>
#include <vector>

#include "tinyseg/chain_schedule.h"

int main() {
  using namespace tinyseg;
  int nt = 0, ns = 0, ne = 0, no = 0;
  if (std::scanf("%d", &nt) != 1 || nt <= 0) return 2;
  std::vector<ChainTensor> tensors(nt);
  for (auto& t : tensors) {
    int streamed = 0;
    if (std::scanf("%d %d %d %d", &t.height, &t.producer, &streamed, &t.ring_rows) != 4) return 2;
    t.streamed = streamed != 0;
  }
  if (std::scanf("%d", &ns) != 1 || ns <= 0) return 2;
  std::vector<ChainStage> stages(ns);
  for (auto& s : stages) {
    if (std::scanf("%d", &s.output) != 1) return 2;
  }
  if (std::scanf("%d", &ne) != 1 || ne < 0) return 2;
  std::vector<ChainEdge> edges(ne);
  for (auto& e : edges) {
    RowMap& m = e.map;
    if (std::scanf("%d %d %d %d %d %d %d %d", &e.stage, &e.tensor, &m.in_h, &m.num, &m.den,
                   &m.offset, &m.before, &m.after) != 8) {
      return 2;
    }
  }
  if (std::scanf("%d", &no) != 1 || no < 0) return 2;
  std::vector<int32_t> outputs(no);
  for (auto& o : outputs) {
    if (std::scanf("%d", &o) != 1) return 2;
  }
  std::vector<int32_t> done(nt), held(nt);
  ChainSchedule schedule;
  Status st = schedule.Init(tensors.data(), nt, stages.data(), ns, edges.data(), ne, outputs.data(),
                            no, ChainState{done.data(), held.data()});
  if (Ok(st)) {
    st = schedule.Run([](int32_t stage, int32_t row) {
      std::printf("step %d %d\n", static_cast<int>(stage), static_cast<int>(row));
      return Status::kOk;
    });
  }
  for (int t = 0; t < nt; ++t) std::printf("held %d %d\n", t, static_cast<int>(held[t]));
  std::printf("status %s\n", StatusName(st));
  return Ok(st) ? 0 : 1;
}
