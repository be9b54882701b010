// Minimal assert-based test runner for the TinySeg core tests.
//
// Host and Cortex-M7 (QEMU semihosting) alike: tests register themselves at
// static-initialisation time, main() runs them all and prints one line per
// test plus the closing "N passed, N failed" line; the exit code is non-zero
// when any check failed. No exceptions: a failed check records the failure and
// returns from the test function.
#ifndef TINYSEG_TESTS_TINYTEST_H_
#define TINYSEG_TESTS_TINYTEST_H_

#include <cstdint>
#include <cstdio>

namespace tinytest {

using TestFn = void (*)();

struct TestCase {
  const char* name;
  TestFn fn;
  TestCase* next;
};

struct Registry {
  TestCase* head = nullptr;
  TestCase* tail = nullptr;
  int current_failures = 0;
};

inline Registry& registry() {
  static Registry r;
  return r;
}

struct Registrar {
  TestCase node;
  Registrar(const char* name, TestFn fn) : node{name, fn, nullptr} {
    Registry& r = registry();
    if (r.tail)
      r.tail->next = &node;
    else
      r.head = &node;
    r.tail = &node;
  }
};

inline void Fail(const char* file, int line, const char* expr) {
  std::printf("  CHECK FAILED %s:%d: %s\n", file, line, expr);
  ++registry().current_failures;
}

// Runs every registered test; returns the process exit code.
inline int RunAll(const char* suite) {
  int passed = 0, failed = 0;
  for (TestCase* t = registry().head; t; t = t->next) {
    registry().current_failures = 0;
    t->fn();
    if (registry().current_failures == 0) {
      ++passed;
      std::printf("[ OK ] %s.%s\n", suite, t->name);
    } else {
      ++failed;
      std::printf("[FAIL] %s.%s\n", suite, t->name);
    }
  }
  std::printf("%s: %d passed, %d failed\n", suite, passed, failed);
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

// Small deterministic PRNG (xorshift64*), identical on host and target.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed ? seed : 0x9E3779B97F4A7C15ull) {}
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  uint32_t Below(uint32_t n) { return n ? static_cast<uint32_t>(Next() % n) : 0; }
};

}  // namespace tinytest

#define TT_CONCAT2(a, b) a##b
#define TT_CONCAT(a, b) TT_CONCAT2(a, b)

#define TEST(name)                                                          \
  static void name();                                                       \
  static ::tinytest::Registrar TT_CONCAT(tt_registrar_, name)(#name, name); \
  static void name()

// Record a failure and return from the current test.
#define CHECK(cond)                                \
  do {                                             \
    if (!(cond)) {                                 \
      ::tinytest::Fail(__FILE__, __LINE__, #cond); \
      return;                                      \
    }                                              \
  } while (0)

#define CHECK_EQ(a, b)                                                       \
  do {                                                                       \
    const auto tt_a_ = (a);                                                  \
    const auto tt_b_ = (b);                                                  \
    if (!(tt_a_ == tt_b_)) {                                                 \
      std::printf("  values: %lld vs %lld\n", static_cast<long long>(tt_a_), \
                  static_cast<long long>(tt_b_));                            \
      ::tinytest::Fail(__FILE__, __LINE__, #a " == " #b);                    \
      return;                                                                \
    }                                                                        \
  } while (0)

#define CHECK_OK(expr)                                             \
  do {                                                             \
    const ::tinyseg::Status tt_s_ = (expr);                        \
    if (tt_s_ != ::tinyseg::Status::kOk) {                         \
      std::printf("  status: %s\n", ::tinyseg::StatusName(tt_s_)); \
      ::tinytest::Fail(__FILE__, __LINE__, #expr " is ok");        \
      return;                                                      \
    }                                                              \
  } while (0)

#define CHECK_STATUS(expr, expected)                                           \
  do {                                                                         \
    const ::tinyseg::Status tt_s_ = (expr);                                    \
    if (tt_s_ != (expected)) {                                                 \
      std::printf("  status: %s, expected %s\n", ::tinyseg::StatusName(tt_s_), \
                  ::tinyseg::StatusName(expected));                            \
      ::tinytest::Fail(__FILE__, __LINE__, #expr " == " #expected);            \
      return;                                                                  \
    }                                                                          \
  } while (0)

#define TINYTEST_MAIN(suite) \
  int main() { return ::tinytest::RunAll(suite); }

#endif  // TINYSEG_TESTS_TINYTEST_H_
