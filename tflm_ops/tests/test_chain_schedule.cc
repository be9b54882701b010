// The chain pull schedule: every row once, rings as small as the windows, and
// a ring smaller than the schedule needs is refused.
#include <vector>

#include "tinyseg/chain_schedule.h"
#include "tinytest.h"

using namespace tinyseg;

namespace {

// input (8 rows, fetched) -> conv 3x3 SAME -> t1 -> conv 3x3 SAME -> t2 (output)
struct TwoConvs {
  ChainTensor tensors[3];
  ChainStage stages[2];
  ChainEdge edges[2];
  int32_t outputs[1] = {2};
  int32_t done[3], held[3];
  TwoConvs(int32_t ring_in, int32_t ring_mid) {
    tensors[0] = ChainTensor{8, -1, true, ring_in};
    tensors[1] = ChainTensor{8, 0, true, ring_mid};
    tensors[2] = ChainTensor{8, 1, true, 0};
    stages[0].output = 1;
    stages[1].output = 2;
    const RowMap conv{8, 1, 1, 0, 1, 1};
    edges[0] = ChainEdge{0, 0, conv};
    edges[1] = ChainEdge{1, 1, conv};
  }
  Status Init(ChainSchedule* s) {
    return s->Init(tensors, 3, stages, 2, edges, 2, outputs, 1, ChainState{done, held});
  }
};

}  // namespace

TEST(WindowsOfConvPoolAndUpsampling) {
  int32_t lo, hi;
  RowWindow(RowMap{8, 1, 1, 0, 1, 1}, 0, &lo, &hi);  // 3x3 SAME: top row reads rows 0..1
  CHECK_EQ(lo, 0);
  CHECK_EQ(hi, 1);
  RowWindow(RowMap{8, 2, 1, 0, 0, 1}, 3, &lo, &hi);  // 2x2 stride 2 VALID pool
  CHECK_EQ(lo, 6);
  CHECK_EQ(hi, 7);
  RowWindow(RowMap{4, 1, 2, 0, 0, 0}, 5, &lo, &hi);  // up-sampling by 2
  CHECK_EQ(lo, 2);
  CHECK_EQ(hi, 2);
  RowWindow(RowMap{6, 1, 1, 0, 1, -1}, 0, &lo, &hi);  // PAD one row on top: row 0 is padding
  CHECK(lo > hi);
  RowWindow(RowMap{6, 1, 1, 0, 1, -1}, 3, &lo, &hi);  // and row 3 reads input row 2
  CHECK_EQ(lo, 2);
  CHECK_EQ(hi, 2);
  // A half-pixel bilinear resize by 2 (int8: position y * 512 - 256 in 1/1024ths): rows 0..1 for
  // output row 1, 1..2 for output row 3, and row 0 alone for output row 0 (clipped).
  const RowMap half{4, 512, 1024, -256, 0, 1};
  RowWindow(half, 0, &lo, &hi);
  CHECK_EQ(lo, 0);
  CHECK_EQ(hi, 0);
  RowWindow(half, 1, &lo, &hi);
  CHECK_EQ(lo, 0);
  CHECK_EQ(hi, 1);
  RowWindow(half, 3, &lo, &hi);
  CHECK_EQ(lo, 1);
  CHECK_EQ(hi, 2);
}

TEST(EveryRowOnceAndRingsOfThree) {
  TwoConvs c(3, 3);
  ChainSchedule s;
  CHECK_OK(c.Init(&s));
  std::vector<int> order;
  int count[2] = {0, 0};
  bool in_order = true;
  CHECK_OK(s.Run([&](int32_t stage, int32_t row) {
    in_order = in_order && row == count[stage];  // rows in order, once each
    ++count[stage];
    order.push_back(stage * 100 + row);
    return Status::kOk;
  }));
  CHECK(in_order);
  CHECK_EQ(count[0], 8);
  CHECK_EQ(count[1], 8);
  CHECK_EQ(c.held[0], 3);
  CHECK_EQ(c.held[1], 3);
  // the first output row needs mid rows 0 and 1 first
  CHECK_EQ(order[0], 0);
  CHECK_EQ(order[1], 1);
  CHECK_EQ(order[2], 100);
}

TEST(FetchedRowsArriveInOrderJustBeforeTheirFirstReader) {
  TwoConvs c(3, 3);
  ChainSchedule s;
  CHECK_OK(c.Init(&s));
  std::vector<int> order;  // -1 - row: a fetched input row; stage * 100 + row: a computed row
  CHECK_OK(s.Run(
      [&](int32_t stage, int32_t row) {
        order.push_back(stage * 100 + row);
        return Status::kOk;
      },
      [&](int32_t tensor, int32_t row) {
        order.push_back(tensor == 0 ? -1 - row : 999);  // only the chain input is fetched
        return Status::kOk;
      }));
  // input rows 0 and 1, then mid row 0; input row 2, mid row 1, output row 0; ...
  const int first[] = {-1, -2, 0, -3, 1, 100, -4, 2, 101};
  for (int i = 0; i < 9; ++i) CHECK_EQ(order[static_cast<size_t>(i)], first[i]);
  int fetched = 0;
  for (int x : order) fetched += x < 0 ? 1 : 0;
  CHECK_EQ(fetched, 8);  // each input row once
  // a failing fetch stops the run with its status
  ChainSchedule t;
  TwoConvs d(3, 3);
  CHECK_OK(d.Init(&t));
  CHECK_STATUS(
      t.Run([](int32_t, int32_t) { return Status::kOk; },
            [](int32_t, int32_t row) { return row == 5 ? Status::kIoError : Status::kOk; }),
      Status::kIoError);
}

TEST(TooSmallRingIsRefused) {
  TwoConvs c(3, 2);
  ChainSchedule s;
  CHECK_OK(c.Init(&s));
  CHECK_STATUS(s.Run([](int32_t, int32_t) { return Status::kOk; }), Status::kOutOfRange);
}

TEST(ComputeErrorStops) {
  TwoConvs c(3, 3);
  ChainSchedule s;
  CHECK_OK(c.Init(&s));
  int calls = 0;
  CHECK_STATUS(
      s.Run([&](int32_t, int32_t) { return ++calls == 4 ? Status::kIoError : Status::kOk; }),
      Status::kIoError);
  CHECK_EQ(calls, 4);
}

TEST(BadChainsAreRefused) {
  TwoConvs c(3, 3);
  ChainSchedule s;
  c.edges[1].map.in_h = 7;  // does not match the tensor
  CHECK_STATUS(c.Init(&s), Status::kInvalidArgument);
  TwoConvs d(3, 3);
  d.tensors[2].producer = 0;  // stage 1's output claims another producer
  CHECK_STATUS(d.Init(&s), Status::kInvalidArgument);
}

TINYTEST_MAIN("chain_schedule")
