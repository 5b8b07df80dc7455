// The oracle against known exact values, against itself (one row alone vs the batch), and the
// comparator's rules for NaN, infinities, zeros and the checkable range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "attncheck/attention.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// One query over Tk keys of width 1, q = 1 and scale 1, so that the scores are k itself.
struct LogitsCase {
  std::vector<float> q{1}, k, v;
  Problem<float> problem;
  explicit LogitsCase(std::vector<float> logits, std::vector<float> values) : k(std::move(logits)), v(std::move(values)) {
    problem.shape = {1, 1, 1, int64_t(k.size()), 1, 1};
    problem.q = q.data();
    problem.k = k.data();
    problem.v = v.data();
    problem.scale = 1;
  }
};

TEST(Oracle, ExactWeightsOfUdlProblem12_4) {
  const LogitsCase c({-3, 1, 100, 5, -1}, {0, 0, 0, 0, 0});
  const ExactRow row = exact_row(c.problem, 0, 0, 0);
  const double exact[5] = {1.852116770e-45, 1.011221493e-43, 1 - 5.637741939e-42, 5.521082277e-42, 1.368539471e-44};
  ASSERT_EQ(row.weights.size(), 5u);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(row.weights[j] / exact[j], 1.0, 1e-9) << "j = " << j;
  EXPECT_EQ(row.lse, 100.0L);  // 100 + 5.6e-42, to long double
}

// The oracle reads the masks on its own (oracle.cpp); the contract's permits() is everyone else's
// rule. On every kind of mask the generator draws (allow masks of every density with emptied rows,
// key lengths, both causal alignments, windows, Tq != Tk, alone and combined), the keys the oracle
// lets carry weight are exactly the ones permits() allows. Scores are all 0 and there is no bias,
// so that no -inf score removes a key by itself.
TEST(Oracle, ReadsTheMasksAsTheContractsRuleDoes) {
  SeededChooser choose(5);
  int64_t kinds[4] = {0, 0, 0, 0};  // cases with an allow mask, key lengths, a causal mask, a window
  for (int n = 0; n < 3000; ++n) {
    Case<float> c = draw_case<float>(choose, {.abi_only = true, .capabilities = ~uint32_t(ATTNCHECK_CAP_BIAS)});
    std::fill(c.q.begin(), c.q.end(), 0.0f);
    kinds[0] += !c.allow.empty();
    kinds[1] += !c.key_lengths.empty();
    kinds[2] += c.causal != Causal::none;
    kinds[3] += c.window_left >= 0 || c.window_right >= 0;
    const Shape& s = c.shape;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t i = 0; i < s.Tq; ++i) {
        std::vector<int64_t> expected;
        for (int64_t j = 0; j < s.Tk; ++j)
          if (permits(c.problem().masks, s, b, i, j)) expected.push_back(j);
        for (int64_t h = 0; h < s.H; ++h) ASSERT_EQ(exact_row(c.problem(), b, h, i).keys, expected) << "case " << n;
      }
  }
  for (int64_t count : kinds) EXPECT_GT(count, 500);
}

// Grouped KV heads: with H 4 and H_kv 2, query heads 0 and 1 read KV head 0, heads 2 and 3 KV
// head 1, which is the H 4 problem with each KV head repeated (h0, h0, h1, h1); the built-in
// implementation agrees with the oracle on it.
TEST(Oracle, GroupedKvHeadsAreTheirGroupsRepeated) {
  SeededChooser choose(9);
  for (int n = 0; n < 50; ++n) {
    const Case<float> mha = draw_case<float>(
        choose, {.max_heads = 4, .min_heads = 4, .abi_only = true, .capabilities = ~uint32_t(ATTNCHECK_CAP_GQA)});
    const Shape& s = mha.shape;
    Case<float> gqa = mha, repeated = mha;
    gqa.shape.H_kv = 2;
    gqa.k.clear();
    gqa.v.clear();
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t kv : {0, 2}) {  // the MHA case's heads 0 and 2 become KV heads 0 and 1
        gqa.k.insert(gqa.k.end(), mha.k.begin() + s.k_at(b, kv, 0), mha.k.begin() + s.k_at(b, kv, 0) + s.Tk * s.dk);
        gqa.v.insert(gqa.v.end(), mha.v.begin() + s.v_at(b, kv, 0), mha.v.begin() + s.v_at(b, kv, 0) + s.Tk * s.dv);
      }
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < 4; ++h) {
        std::copy_n(gqa.k.begin() + gqa.shape.k_at(b, h, 0), s.Tk * s.dk, repeated.k.begin() + s.k_at(b, h, 0));
        std::copy_n(gqa.v.begin() + gqa.shape.v_at(b, h, 0), s.Tk * s.dv, repeated.v.begin() + s.v_at(b, h, 0));
      }
    ASSERT_EQ(int64_t(gqa.k.size()), gqa.shape.k_size());
    const Reference grouped = reference(gqa.problem()), expanded = reference(repeated.problem());
    for (size_t e = 0; e < grouped.out.exact.size(); ++e) {
      const long double x = grouped.out.exact[e], y = expanded.out.exact[e];
      ASSERT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << "case " << n << ", element " << e;
    }
    std::vector<float> out(size_t(s.out_size()));
    attention(gqa.problem(), Result<float>{out.data()});
    EXPECT_TRUE(compare(out.data(), grouped.out).ok()) << "case " << n;
  }
}

// Paged KV is an index map of the dense problem: the same keys in a pool of blocks of 3, each
// sequence's blocks in reverse order at the pool's end, every slot no key fills NaN, give the dense
// problem's exact out and lse and their bounds bit for bit, and so does the built-in's out.
TEST(Oracle, PagedKvIsAnIndexMapOfTheDenseProblem) {
  SeededChooser choose(39);
  for (int n = 0; n < 40; ++n) {
    const Case<float> dense = draw_case<float>(choose, {.abi_only = true});
    const Shape& s = dense.shape;
    constexpr int64_t BS = 3;
    const int64_t BPS = (s.Tk + BS - 1) / BS, NB = s.B * BPS + 1, kv = s.kv_heads();  // one block no table names
    std::vector<int32_t> table(size_t(s.B * BPS));
    std::vector<float> k(size_t(NB * kv * BS * s.dk), kNaN), v(size_t(NB * kv * BS * s.dv), kNaN);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t e = 0; e < BPS; ++e) {
        const int64_t block = NB - 1 - (b * BPS + e);
        table[size_t(b * BPS + e)] = int32_t(block);
        for (int64_t g = 0; g < kv; ++g)
          for (int64_t slot = 0; slot < BS && e * BS + slot < s.Tk; ++slot) {
            const int64_t j = e * BS + slot, row = (block * kv + g) * BS + slot, from = (b * kv + g) * s.Tk + j;
            std::copy_n(dense.k.begin() + from * s.dk, s.dk, k.begin() + row * s.dk);
            std::copy_n(dense.v.begin() + from * s.dv, s.dv, v.begin() + row * s.dv);
          }
      }
    Problem<float> paged = dense.problem();
    paged.shape.NB = NB, paged.shape.BS = BS, paged.shape.BPS = BPS;
    paged.k = k.data(), paged.v = v.data(), paged.block_table = table.data();
    std::vector<float> out_dense(size_t(s.out_size())), out_paged(out_dense.size());
    ASSERT_EQ(problem_error(paged, Result<float>{out_paged.data()}), "") << "case " << n;
    const Reference x = reference(dense.problem()), y = reference(paged);
    for (const auto& [a, b] : {std::pair{&x.out, &y.out}, {&x.lse, &y.lse}})
      for (size_t e = 0; e < a->exact.size(); ++e) {
        ASSERT_TRUE(a->exact[e] == b->exact[e] || (std::isnan(a->exact[e]) && std::isnan(b->exact[e])))
            << a->name << " " << e << ", case " << n;
        ASSERT_TRUE(a->bound[e] == b->bound[e] || (std::isnan(a->bound[e]) && std::isnan(b->bound[e])))
            << a->name << " " << e << ", case " << n;
      }
    attention(dense.problem(), Result<float>{out_dense.data()});
    attention(paged, Result<float>{out_paged.data()});
    EXPECT_EQ(std::memcmp(out_dense.data(), out_paged.data(), out_dense.size() * sizeof(float)), 0) << "case " << n;
  }
}

// Varlen is an index map of separate problems: sequences packed along Tq and Tk (lengths 0 to whole,
// with_varlen), and each sequence with queries and keys laid out by hand as a dense problem of its
// own (B 1, its lengths, the same causal mode, window, scale, soft-cap and sinks), give the same
// exact out and lse and bounds bit for bit in that sequence's rows, the built-in's two outs within them; a
// sequence with no key gives rows of 0 (lse -inf, or the sink's).
TEST(Oracle, VarlenIsAnIndexMapOfSeparateProblems) {
  auto same = [](auto x, auto y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  SeededChooser choose(39);
  for (int n = 0; n < 40; ++n) {
    const Case<float> packed = with_varlen(choose, draw_case<float>(choose, {.abi_only = true}));
    const Problem<float> p = packed.problem();
    const Shape& s = p.shape;
    std::vector<float> out_packed(size_t(s.out_size())), lse_packed(size_t(s.lse_size()));
    ASSERT_EQ(problem_error(p, Result<float>{out_packed.data()}), "") << "case " << n;
    attention(p, Result<float>{out_packed.data(), nullptr, lse_packed.data()});
    const Reference x = reference(p);
    for (int64_t b = 0; b < s.B; ++b) {
      const Sequence q = sequence(p, b);
      if (q.Tk == 0) {
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t i = q.first_q; i < q.first_q + q.Tq; ++i) {
            const float sink = packed.sinks.empty() ? -kInf : packed.sinks[size_t(h)];
            EXPECT_EQ(x.lse.exact[size_t(s.lse_at(0, h, i))], sink) << "case " << n;
            for (int64_t col = 0; col < s.dv; ++col) EXPECT_EQ(x.out.exact[size_t(s.out_at(0, h, i) + col)], 0) << "case " << n;
          }
        continue;
      }
      if (q.Tq == 0) continue;
      Case<float> alone = packed;  // by hand: rows first_q.. of each head's q, first_k.. of k and v
      alone.cu_seqlens_q.clear(), alone.cu_seqlens_k.clear();
      Shape& t = alone.shape;
      t = Shape{1, s.H, q.Tq, q.Tk, s.dk, s.dv, s.H_kv};
      alone.q.clear(), alone.k.clear(), alone.v.clear();
      auto rows = [](std::vector<float>& to, const std::vector<float>& from, int64_t first, int64_t count, int64_t width) {
        to.insert(to.end(), from.begin() + first * width, from.begin() + (first + count) * width);
      };
      for (int64_t h = 0; h < s.H; ++h) {
        rows(alone.q, packed.q, h * s.Tq + q.first_q, q.Tq, s.dk);  // q [H,Tq,dk]
        if (h % (s.H / s.kv_heads()) == 0) {                        // k [H_kv,Tk,dk], v [H_kv,Tk,dv]
          rows(alone.k, packed.k, s.kv_head(h) * s.Tk + q.first_k, q.Tk, s.dk);
          rows(alone.v, packed.v, s.kv_head(h) * s.Tk + q.first_k, q.Tk, s.dv);
        }
      }
      const Reference y = reference(alone.problem());
      std::vector<float> out_alone(size_t(t.out_size()));
      attention(alone.problem(), Result<float>{out_alone.data()});
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t i = 0; i < q.Tq; ++i) {
          const size_t at_x = size_t(s.lse_at(0, h, q.first_q + i)), at_y = size_t(t.lse_at(0, h, i));
          EXPECT_TRUE(same(x.lse.exact[at_x], y.lse.exact[at_y])) << "case " << n;
          EXPECT_TRUE(same(x.lse.bound[at_x], y.lse.bound[at_y])) << "case " << n;
          for (int64_t col = 0; col < s.dv; ++col) {
            const size_t ox = size_t(s.out_at(0, h, q.first_q + i) + col), oy = size_t(t.out_at(0, h, i) + col);
            EXPECT_TRUE(same(x.out.exact[ox], y.out.exact[oy])) << "case " << n << " sequence " << b;
            EXPECT_TRUE(same(x.out.bound[ox], y.out.bound[oy])) << "case " << n << " sequence " << b;
            // The built-in's sums run over other lengths of keys (the masked ones add 0 in another order):
            // the two within twice the one bound, not bit for bit.
            EXPECT_TRUE(same(out_packed[ox], out_alone[oy]) || std::fabs(out_packed[ox] - out_alone[oy]) <= 2 * x.out.bound[ox])
                << "case " << n << " sequence " << b;
          }
        }
    }
  }
}

// A soft-cap: score = cap tanh(scale q.k / cap), then the bias. One query q = 3 over keys 2, -1, 0
// with scale 1 and cap 2: scores 2 tanh(3), 2 tanh(-1.5), 0, in long double's tanh.
TEST(Oracle, SoftCappedScores) {
  LogitsCase c({2, -1, 0}, {1, 2, 3});
  const float three = 3;
  c.problem.q = &three;
  c.problem.softcap = 2;
  const long double s[3] = {2 * std::tanh(3.0L), 2 * std::tanh(-1.5L), 0};
  const long double m = s[0], l = std::exp(s[0] - m) + std::exp(s[1] - m) + std::exp(s[2] - m);
  const ExactRow row = exact_row(c.problem, 0, 0, 0);
  ASSERT_EQ(row.weights.size(), 3u);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(row.weights[j] / double(std::exp(s[j] - m) / l), 1.0, 1e-15) << j;
  EXPECT_NEAR(double(row.lse - (m + std::log(l))), 0.0, 1e-15);
}

// Rows run on every core; each is computed the same way whatever the number of threads, so the
// reference is the same to the bit on one thread and on four.
TEST(Oracle, SameResultsOnAnyNumberOfThreads) {
  SeededChooser choose(17);
  int threaded = 0;  // cases above the 2^16 query-key pairs that start threads
  for (int n = 0; n < 8; ++n) {
    const Case<double> c = draw_case<double>(choose, {.max_len = 300, .max_width = 4, .min_len = 100});
    threaded += c.shape.B * c.shape.H * c.shape.Tq * c.shape.Tk >= (1 << 16);
    setenv("ATTNCHECK_THREADS", "1", 1);
    const Reference one = reference(c.problem());
    setenv("ATTNCHECK_THREADS", "4", 1);
    const Reference four = reference(c.problem());
    unsetenv("ATTNCHECK_THREADS");
    for (auto [a, b] : {std::pair{&one.out, &four.out}, {&one.lse, &four.lse}}) {
      for (size_t e = 0; e < a->exact.size(); ++e)  // long double has padding bytes: compare values
        ASSERT_TRUE(a->exact[e] == b->exact[e] || (std::isnan(a->exact[e]) && std::isnan(b->exact[e]))) << n;
      ASSERT_EQ(std::memcmp(a->bound.data(), b->bound.data(), a->bound.size() * sizeof(double)), 0) << n;
      ASSERT_EQ(std::memcmp(a->natural.data(), b->natural.data(), a->natural.size() * sizeof(double)), 0) << n;
    }
  }
  EXPECT_GE(threaded, 4);
}

TEST(Oracle, ExplicitRowMatchesBatchedResult) {
  SeededChooser choose(11);
  for (int n = 0; n < 40; ++n) {
    const Case<float> c = draw_case<float>(choose);
    const Reference batched = reference(c.problem());
    const Shape& s = c.shape;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h) {
        const Reference alone = reference(slice(c, b, h).problem());
        const size_t at = size_t(s.out_at(b, h, 0));
        for (size_t e = 0; e < alone.out.exact.size(); ++e) {
          const long double x = batched.out.exact[at + e], y = alone.out.exact[e];
          EXPECT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << "case " << n << " b " << b << " h " << h;
          EXPECT_EQ(batched.out.bound[at + e], alone.out.bound[e]);
        }
      }
  }
}

// The built-in implementation's out [B,H,Tq,dv] for case c.
template <class T>
std::vector<T> builtin(const Case<T>& c) {
  std::vector<T> out(size_t(c.shape.B * c.shape.H * c.shape.Tq * c.shape.dv));
  attention(c.problem(), Result<T>{out.data()});
  return out;
}

TEST(Comparator, NanWhereTheExactIsFiniteFailsUnlikeAFabsCheck) {
  const LogitsCase c({0.5f, -1, 2}, {1, 2, 3});
  const Reference ref = reference(c.problem);
  const float computed = kNaN;
  EXPECT_FALSE(std::fabs(computed - float(ref.out.exact[0])) > 1e-3f);  // the hole in llm.c-style checks
  const Comparison result = compare(&computed, ref.out);
  EXPECT_EQ(result.failed, 1);
  EXPECT_NE(result.report("float").find("nan"), std::string::npos);
}

TEST(Comparator, InfinityWhereTheExactIsFiniteFails) {
  const LogitsCase c({0.5f, -1, 2}, {1, 2, 3});
  const float computed = kInf;
  EXPECT_EQ(compare(&computed, reference(c.problem).out).failed, 1);
}

TEST(Comparator, EmptyRowMustBeExactlyZeroOfEitherSign) {
  LogitsCase c({1, 2}, {5, 6});
  const uint8_t none[2] = {0, 0};
  c.problem.masks.allow = none;
  const Reference ref = reference(c.problem);
  for (float computed : {0.0f, -0.0f}) EXPECT_EQ(compare(&computed, ref.out).failed, 0);
  for (float computed : {1e-30f, kNaN}) EXPECT_EQ(compare(&computed, ref.out).failed, 1);
}

TEST(Comparator, NanPolicyRowMustBeNan) {
  LogitsCase c({1, 2}, {5, 6});
  const uint8_t none[2] = {0, 0};
  c.problem.masks.allow = none;
  c.problem.empty_rows = EmptyRows::nan;
  const Reference ref = reference(c.problem);
  const float nan = kNaN, zero = 0;
  EXPECT_EQ(compare(&nan, ref.out).failed, 0);
  EXPECT_EQ(compare(&zero, ref.out).failed, 1);
}

TEST(Comparator, NanInAPermittedValueMustReachTheOutput) {
  const LogitsCase c({1, 2}, {5, kNaN});
  const Reference ref = reference(c.problem);
  const float finite = 5, nan = kNaN;
  EXPECT_EQ(compare(&finite, ref.out).failed, 1);
  EXPECT_EQ(compare(&nan, ref.out).failed, 0);
}

TEST(Comparator, ScoresBeyondFloatRangeAreCountedNotChecked) {
  // q . k = 1e40 overflows float: no correct float kernel can be held to the exact value.
  LogitsCase c({1e20f, 0}, {5, 6});
  c.q = {1e20f};
  c.problem.q = c.q.data();
  const float computed = kNaN;
  const Comparison result = compare(&computed, reference(c.problem).out);
  EXPECT_EQ(result.failed, 0);
  EXPECT_EQ(result.unchecked, 1);
}

TEST(Comparator, ReportListsTenMismatchesThenCounts) {
  SeededChooser choose(3);
  CaseLimits limits{1, 1, 24, 4};
  limits.capabilities =
      ~uint32_t(ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16 | ATTNCHECK_CAP_KV_CACHE);  // the float32 case it was written on
  Case<float> c = draw_case<float>(choose, limits);
  c.allow.clear();
  c.key_lengths.clear();
  c.bias.clear();
  std::vector<float> out = builtin(c);
  for (float& x : out) x += 1;
  const Comparison result = compare(out.data(), reference(c.problem()).out);
  ASSERT_GT(result.failed, 10);
  const std::string report = result.report("float");
  EXPECT_EQ(std::count(report.begin(), report.end(), '\n'), 2 + 10 + 1) << report;
  EXPECT_NE(report.find("... and " + std::to_string(result.failed - 10) + " more"), std::string::npos) << report;
  EXPECT_NE(report.find("error/bound"), std::string::npos);
}

TEST(Comparator, UlpDistanceCountsValuesBetween) {
  const LogitsCase c({0}, {1});  // exact output 1
  float computed = 1;
  for (int step = 0; step < 100; ++step) computed = std::nextafter(computed, 2.0f);
  const Comparison result = compare(&computed, reference(c.problem).out);
  ASSERT_EQ(result.failed, 1);
  EXPECT_EQ(result.mismatches[0].ulps, 100);
}

}  // namespace
}  // namespace attncheck
