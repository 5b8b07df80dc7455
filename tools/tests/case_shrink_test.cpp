// The shrinker's neighbours (case_shrink.hpp): never larger, always well formed, masks folded
// without changing what a query sees, and a greedy shrink reaching the smallest case a predicate
// allows where the old neighbours stopped short.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/case_shrink.hpp"
#include "attncheck/cases.hpp"

namespace attncheck {
namespace {

template <class T>
std::vector<Case<T>> neighbours(const Case<T>& c, uint32_t capabilities = ~0u) {
  std::vector<Case<T>> all;
  offer_simpler<T>(c, capabilities, [&](Case<T>&& n) {
    all.push_back(std::move(n));
    return false;
  });
  return all;
}

// Shrinks c greedily: the first neighbour that keeps `fails` true, until none does.
template <class T>
Case<T> shrink(Case<T> c, const std::function<bool(const Case<T>&)>& fails) {
  for (bool found = true; found;) {
    Case<T> next;
    found = offer_simpler<T>(c, ~0u, [&](Case<T>&& n) {
      if (!fails(n)) return false;
      next = std::move(n);
      return true;
    });
    if (found) c = std::move(next);
  }
  return c;
}

template <class T>
void expect_well_formed(const Case<T>& c) {
  const Shape& s = c.shape;
  ASSERT_GE(s.B, 1);
  ASSERT_GE(s.H, 1);
  ASSERT_GE(s.Tq, 1);
  ASSERT_GE(s.Tk, 1);
  ASSERT_GE(s.dk, 1);
  ASSERT_GE(s.dv, 1);
  ASSERT_EQ(s.H % s.kv_heads(), 0);
  ASSERT_EQ(c.q.size(), size_t(s.q_size()));
  ASSERT_EQ(c.k.size(), size_t(s.k_size()));
  ASSERT_EQ(c.v.size(), size_t(s.v_size()));
  if (!c.bias.empty()) {
    ASSERT_EQ(c.bias.size(), size_t(s.scores_size()));
  }
  if (!c.allow.empty()) {
    ASSERT_EQ(c.allow.size(), size_t(s.allow_size()));
  }
  if (!c.key_lengths.empty()) {
    ASSERT_EQ(c.key_lengths.size(), size_t(s.B));
  }
  for (int32_t length : c.key_lengths) ASSERT_TRUE(length >= 0 && length <= s.Tk);
  std::vector<T> out(size_t(s.out_size()));
  EXPECT_EQ(problem_error(c.problem(), Result<T>{out.data()}), "");
}

// Not farther from 0 (a NaN or inf may become anything finite), or a plain value (+-0.5, 1, 2, 3)
// in place of one below 1 in magnitude.
template <class T>
bool plainer_or_same(T now, T before) {
  const T m = std::fabs(now);
  const bool plain = m == T(0.5) || m == T(1) || m == T(2) || m == T(3);
  return !std::isfinite(before) || std::fabs(now) <= std::fabs(before) || (std::fabs(before) < T(1) && plain);
}

TEST(CaseShrink, EveryNeighbourIsWellFormedAndNoLargerOrPlainer) {
  int64_t checked = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    SeededChooser choose(seed);
    const Case<float> c = draw_case<float>(choose);
    const Shape& s = c.shape;
    for (const Case<float>& n : neighbours(c)) {
      ++checked;
      expect_well_formed(n);
      const Shape& m = n.shape;
      ASSERT_TRUE(m.B <= s.B && m.H <= s.H && m.kv_heads() <= s.kv_heads() && m.Tq <= s.Tq && m.Tk <= s.Tk && m.dk <= s.dk &&
                  m.dv <= s.dv)
          << "seed " << seed;
      EXPECT_LE(case_size(n), case_size(c));
      EXPECT_LE(n.window_left, c.window_left);
      EXPECT_LE(n.window_right, c.window_right);
      if (c.softcap == 0) {
        EXPECT_EQ(n.softcap, 0);
      }
      if (c.bias.empty()) {
        EXPECT_TRUE(n.bias.empty());
      }
      if (m.B == s.B && m.H == s.H && m.Tq == s.Tq && m.Tk == s.Tk && m.dk == s.dk && m.dv == s.dv) {
        for (size_t at = 0; at < c.q.size(); ++at) ASSERT_TRUE(plainer_or_same(n.q[at], c.q[at]));
        for (size_t at = 0; at < c.k.size(); ++at) ASSERT_TRUE(plainer_or_same(n.k[at], c.k[at]));
        for (size_t at = 0; at < c.v.size(); ++at) ASSERT_TRUE(plainer_or_same(n.v[at], c.v[at]));
        for (size_t at = 0; at < n.bias.size(); ++at) ASSERT_TRUE(plainer_or_same(n.bias[at], c.bias[at]));
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

// A case with causal, window and key-length masks: the fold into one allow mask changes no
// query's permitted keys, and is not offered to a kernel without allow masks.
TEST(CaseShrink, FoldedMasksPermitTheSameKeys) {
  int64_t folds = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SeededChooser choose(seed);
    const Case<float> c = draw_case<float>(choose);
    if (!c.allow.empty() || (c.causal == Causal::none && c.window_left < 0 && c.window_right < 0)) continue;
    // Nothing else adds an allow mask.
    const auto is_fold = [](const Case<float>& n) { return !n.allow.empty(); };
    for (const Case<float>& n : neighbours(c, ~0u & ~uint32_t(ATTNCHECK_CAP_ALLOW))) ASSERT_FALSE(is_fold(n));
    for (const Case<float>& n : neighbours(c)) {
      if (!is_fold(n)) continue;
      ++folds;
      EXPECT_TRUE(n.causal == Causal::none && n.window_left < 0 && n.window_right < 0 && n.key_lengths.empty());
      for (int64_t b = 0; b < c.shape.B; ++b)
        for (int64_t i = 0; i < c.shape.Tq; ++i)
          for (int64_t j = 0; j < c.shape.Tk; ++j) ASSERT_EQ(n.permits(b, i, j), c.permits(b, i, j)) << "seed " << seed;
    }
  }
  EXPECT_GT(folds, 20);
}

// H 3 sharing one KV head, the mark in the last query head's q: removing the last member of every
// group (all the old neighbours could) loses it; removing the first two keeps it, down to H 1.
TEST(CaseShrink, AnyMemberOfAGroupCanGo) {
  Case<float> c;
  c.shape = {1, 3, 1, 1, 1, 1, 1};
  c.q = {0, 0, 7};
  c.k = {0};
  c.v = {0};
  const Case<float> shrunk =
      shrink<float>(c, [](const Case<float>& n) { return std::find(n.q.begin(), n.q.end(), 7.0f) != n.q.end(); });
  EXPECT_EQ(shrunk.shape.H, 1);
  EXPECT_EQ(shrunk.shape.kv_heads(), 1);
}

// Groups of 5 over 2 KV heads, a bug that needs a group that is not a power of two (as
// gqa_group_power_of_two): one member less (4) passes, so two go at once, down to groups of 3.
TEST(CaseShrink, GroupsLoseSeveralMembersAtOnce) {
  Case<float> c;
  c.shape = {1, 10, 1, 1, 1, 1, 2};
  c.q.assign(10, 0);
  c.k = {0, 0};
  c.v = {0, 0};
  const Case<float> shrunk = shrink<float>(c, [](const Case<float>& n) {
    const int64_t group = n.shape.H / n.shape.kv_heads();
    return n.shape.kv_heads() == 2 && (group & (group - 1)) != 0;
  });
  EXPECT_EQ(shrunk.shape.H, 6);
  EXPECT_EQ(shrunk.shape.kv_heads(), 2);
}

// A query that sees one key at the window's left edge, Tk 4 with window 3: removing keys moves the
// diagonal, so only a removal that narrows the window with it keeps the edge, down to one key and
// window 0, 0 (window_exclusive's minimal case).
TEST(CaseShrink, AWindowEdgeShrinksToOneKey) {
  Case<float> c;
  c.shape = {1, 1, 1, 4, 1, 1};
  c.q = {0};
  c.k = {0, 0, 0, 0};
  c.v = {1, 0, 0, 0};
  c.window_left = 3;
  c.window_right = 0;
  c.key_lengths = {1};
  const auto edge_seen = [](const Case<float>& n) {
    const int64_t diagonal = n.shape.Tk - n.shape.Tq;  // query 0's
    for (int64_t j = 0; j < n.shape.Tk; ++j)
      if (n.window_left >= 0 && j == diagonal - n.window_left && n.permits(0, 0, j) && n.v[size_t(j)] == 1.0f) return true;
    return false;
  };
  ASSERT_TRUE(edge_seen(c));
  const Case<float> shrunk = shrink<float>(c, edge_seen);
  EXPECT_EQ(shrunk.shape.Tk, 1);
  EXPECT_EQ(shrunk.window_left, 0);
}

// A factor a power of two hides: the value must not be a power of two, and shrinks to 3.
TEST(CaseShrink, ValuesReachThreeWhenPowersOfTwoHideTheBug) {
  Case<float> c;
  c.shape = {1, 1, 1, 1, 1, 1};
  c.q = {0};
  c.k = {0};
  c.v = {-2496.44067f};
  const Case<float> shrunk = shrink<float>(c, [](const Case<float>& n) {
    const float x = std::fabs(n.v[0]);
    return x != 0 && std::exp2(std::floor(std::log2(x))) != x;
  });
  EXPECT_EQ(shrunk.v[0], -3.0f);
}

}  // namespace
}  // namespace attncheck
