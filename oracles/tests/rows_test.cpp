// Large problems (rows.hpp): the sample holds the rows it promises, a sampled reference is the full
// one on its rows, and the screen brings a wrong unsampled row to the exact check while a correct
// output brings none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attncheck/attention.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/rows.hpp"

namespace attncheck {
namespace {

// A causal problem [1,H,T,T,d], standard normal values from a fixed seed.
Case<float> causal_case(int64_t H, int64_t T, int64_t d) {
  Case<float> c;
  c.shape = {1, H, T, T, d, d};
  SeededChooser choose(5);
  for (auto* x : {&c.q, &c.k, &c.v})
    for (int64_t n = 0; n < H * T * d; ++n) x->push_back(float(standard_normal(choose)));
  c.causal = Causal::upper_left;
  return c;
}

std::vector<float> builtin(const Case<float>& c) {
  std::vector<float> out(size_t(c.shape.out_size()));
  attention(c.problem(), Result<float>{out.data()});
  return out;
}

TEST(Rows, SampleHoldsFirstLastAndTileEdges) {
  const Case<float> c = causal_case(2, 300, 4);
  const std::vector<uint8_t> rows = sample_rows(c.problem(), 40);
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_TRUE(rows[size_t(h * 300)]) << "head " << h;
    EXPECT_TRUE(rows[size_t(h * 300 + 299)]) << "head " << h;
  }
  // Causal: query i sees i + 1 keys, so the tile edges of the count are queries 127, 128 (128 and
  // 129 keys) and 15, 16; each goes to some head.
  for (int64_t i : {14, 15, 16, 126, 127, 128}) EXPECT_TRUE(rows[size_t(i)] || rows[size_t(300 + i)]) << "query " << i;
  EXPECT_LE(std::count(rows.begin(), rows.end(), 1), 4 + 40);
  EXPECT_EQ(rows, sample_rows(c.problem(), 40)) << "the same problem gets the same sample";
}

TEST(Rows, SampledReferenceIsTheFullOneOnItsRows) {
  const Case<float> c = causal_case(1, 1100, 8);  // 1.2e6 pairs: above kAllRowsPairs
  const Reference sampled = reference(c.problem());
  ASSERT_FALSE(sampled.out.exact_rows.empty());
  const std::vector<uint8_t> every(size_t(c.shape.lse_size()), 1);
  const Reference full = reference(c.problem(), &every);
  int64_t exact = 0;
  for (int64_t i = 0; i < c.shape.Tq; ++i)
    for (int64_t col = 0; col < c.shape.dv; ++col) {
      const size_t n = size_t(i * c.shape.dv + col);
      if (sampled.out.exact_rows[size_t(i)]) {
        EXPECT_EQ(sampled.out.exact[n], full.out.exact[n]);
        EXPECT_EQ(sampled.out.bound[n], full.out.bound[n]);
        exact += col == 0;
      } else {
        EXPECT_TRUE(std::isnan(sampled.out.exact[n]) && std::isinf(sampled.out.bound[n]));
      }
    }
  const std::vector<float> out = builtin(c);
  const Comparison comparison = compare(out.data(), sampled.out);
  EXPECT_EQ(comparison.rows, 1100);
  EXPECT_EQ(comparison.exact_rows, exact);
  EXPECT_EQ(comparison.checked, exact * c.shape.dv);
  EXPECT_TRUE(comparison.ok());
}

TEST(Rows, ScreenBringsAWrongUnsampledRowToTheExactCheck) {
  const Case<float> c = causal_case(1, 1100, 8);
  const std::vector<float> plain = builtin(c);
  const Reference sampled = reference(c.problem());
  const int64_t sample = std::count(sampled.out.exact_rows.begin(), sampled.out.exact_rows.end(), 1);
  // A correct output: right, and no row added.
  Reference ref = sampled;
  EXPECT_TRUE(judge_rows(c.problem(), plain.data(), plain.data(), ref).ok());
  EXPECT_EQ(std::count(ref.out.exact_rows.begin(), ref.out.exact_rows.end(), 1), sample);
  // One unsampled row off by 1e-2 in its first value: flagged, computed, and wrong there.
  int64_t row = 1;
  while (sampled.out.exact_rows[size_t(row)]) ++row;
  std::vector<float> wrong = plain;
  wrong[size_t(row * c.shape.dv)] += 1e-2f;
  ref = sampled;
  const Verdict verdict = judge_rows(c.problem(), wrong.data(), plain.data(), ref);
  ASSERT_FALSE(verdict.bound.ok());
  EXPECT_EQ(verdict.bound.mismatches[0].at[2], row);
  EXPECT_NE(verdict.bound.summary().find("screened"), std::string::npos) << verdict.bound.summary();
  // A NaN, or an infinity of the wrong sign, in an unsampled row: flagged too.
  for (const float special : {NAN, -INFINITY}) {
    std::vector<float> odd = plain;
    odd[size_t(row * c.shape.dv + 3)] = special;
    ref = sampled;
    EXPECT_FALSE(judge_rows(c.problem(), odd.data(), plain.data(), ref).bound.ok()) << special;
  }
}

// The precision gate's limit scales with the built-in's largest loss over every row: a sampled
// check computes every row before it calls a kernel imprecise, so it says what --rows all says.
TEST(Rows, ImpreciseOnlyAfterEveryRowIsComputed) {
  const Case<float> c = causal_case(1, 1100, 8);
  const std::vector<float> plain = builtin(c);
  std::vector<float> sloppy = plain;
  // Rows of 1000 keys or more (causal: query i sees i + 1) off by 4e-4 relative: inside their bound
  // (about n u of sum p |v| per weight), a few hundred natural units: imprecise.
  for (size_t n = 1000 * size_t(c.shape.dv); n < sloppy.size(); ++n) sloppy[n] *= 1 + 4e-4f;
  Reference ref = reference(c.problem());
  const Verdict verdict = judge_rows(c.problem(), sloppy.data(), plain.data(), ref);
  const std::vector<uint8_t> every(size_t(c.shape.lse_size()), 1);
  Reference full = reference(c.problem(), &every);
  const Verdict full_verdict = judge(sloppy.data(), plain.data(), full.out);
  ASSERT_TRUE(full_verdict.bound.ok());
  ASSERT_FALSE(full_verdict.precision.ok());
  EXPECT_TRUE(verdict.bound.ok());
  EXPECT_FALSE(verdict.precision.ok());
  EXPECT_EQ(verdict.precision.limit, full_verdict.precision.limit);
  EXPECT_EQ(std::count(ref.out.exact_rows.begin(), ref.out.exact_rows.end(), 1), c.shape.lse_size());
}

}  // namespace
}  // namespace attncheck
