// The tiled variants of impl/variants against the oracle, on shapes that straddle their tiles and
// thresholds: the correct ones (tiled_split_kv, tiled_causal_skipping) stay within the bound, and
// each size-dependent planted bug stays within it below its threshold and exceeds it at a shape
// that triggers it. The oracle checks chosen rows only (about 20 per head), so that the whole runs
// in about a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"
#include "variant.hpp"

namespace attncheck {
namespace {

// What a case holds besides its shape. Values are drawn from a fixed seed.
struct Spec {
  Shape shape;
  Causal causal = Causal::none;
  int32_t key_length = -1;                   // batch 0's key length (the others keep Tk); -1: no padding
  bool allow_mask = false;                   // a random allow mask (3 in 4 allowed), one query row emptied
  int64_t blocked_from = 0, blocked_to = 0;  // keys [from, to) forbidden to every query (an empty chunk)
  bool positive_values = false;              // v in [1, 3]: no cancellation in the output, the tightest bound
  uint64_t seed = 1;
};

// The case of a spec: q normal times 2, k normal, v normal or in [1, 3].
Case<float> build(const Spec& spec) {
  SeededChooser choose(spec.seed);
  Case<float> c;
  c.shape = spec.shape;
  const Shape& s = c.shape;
  c.causal = spec.causal;
  c.q.resize(size_t(s.q_size()));
  c.k.resize(size_t(s.k_size()));
  c.v.resize(size_t(s.v_size()));
  for (float& x : c.q) x = float(2 * standard_normal(choose));
  for (float& x : c.k) x = float(standard_normal(choose));
  for (float& x : c.v)
    x = spec.positive_values ? float(1 + double(choose.below(1u << 20)) * 0x1p-19) : float(standard_normal(choose));
  if (spec.key_length >= 0) {
    c.key_lengths.assign(size_t(s.B), int32_t(s.Tk));
    c.key_lengths[0] = spec.key_length;
  }
  if (spec.allow_mask || spec.blocked_to > spec.blocked_from) {
    c.allow.assign(size_t(s.allow_size()), 1);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) {
          uint8_t& a = c.allow[size_t(s.allow_at(b, i) + j)];
          if (spec.allow_mask) a = choose.below(4) != 0 && !(s.Tq > 1 && i == 1);
          if (j >= spec.blocked_from && j < spec.blocked_to) a = 0;
        }
  }
  return c;
}

// The rows checked: the first and last, those at the tile edges the variants use (32, 64, 128,
// 256), and a few drawn from the seed; at most about 20.
std::vector<int64_t> chosen_rows(const Shape& s, uint64_t seed) {
  std::set<int64_t> rows = {0, s.Tq - 1};
  for (int64_t i : {1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257})
    if (i < s.Tq) rows.insert(i);
  SeededChooser choose(seed + 1000);
  for (int extra = 0; extra < 4; ++extra) rows.insert(int64_t(choose.below(uint64_t(s.Tq))));
  return {rows.begin(), rows.end()};
}

// |computed - exact| / bound for one element, by compare.hpp's rules: a failing special value, NaN
// against a finite exact value, or any error against a bound of 0 is +inf.
double error_over_bound(float computed, long double exact, double bound) {
  const bool ok = within_bound(computed, exact, bound);
  if (!std::isfinite(exact) || bound == 0) return ok ? 0 : INFINITY;
  const double error = double(std::fabs(computed - exact));
  return std::isfinite(error) ? error / bound : INFINITY;
}

// The largest error/bound over the chosen rows of every (b, h), and where it was.
struct Checked {
  double worst = 0;
  std::string where = "nowhere";
  int64_t elements = 0, failed = 0;
};

Checked check(const Case<float>& c, const Variant& variant, uint64_t row_seed) {
  const Shape& s = c.shape;
  const Problem<float> problem = c.problem();
  std::vector<float> out(size_t(s.out_size()), -12345.f);
  variant_attention(problem, out.data(), variant);
  Checked result;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i : chosen_rows(s, row_seed)) {
        const ExactRow row = exact_row(problem, b, h, i);
        for (int64_t col = 0; col < s.dv; ++col) {
          if (std::isinf(row.bound[size_t(col)])) continue;  // outside float's range: not checked
          const float x = out[size_t(s.out_at(b, h, i) + col)];
          const double ratio = error_over_bound(x, row.out[size_t(col)], row.bound[size_t(col)]);
          result.failed += ratio > 1;
          if (++result.elements == 1 || ratio > result.worst) {
            result.worst = ratio;
            char text[200];
            std::snprintf(text, sizeof text, "out[%lld,%lld,%lld,%lld] computed %.9g exact %.9Lg bound %.3g", (long long)b,
                          (long long)h, (long long)i, (long long)col, double(x), row.out[size_t(col)], row.bound[size_t(col)]);
            result.where = text;
          }
        }
      }
  if (result.failed > 0) result.where += " (" + std::to_string(result.failed) + " elements outside the bound)";
  return result;
}

Checked check(const Spec& spec, const Variant& variant) { return check(build(spec), variant, spec.seed); }

std::string describe(const Spec& spec) {
  const Shape& s = spec.shape;
  char text[200];
  std::snprintf(text, sizeof text, "B %lld H %lld H_kv %lld Tq %lld Tk %lld dk %lld dv %lld, causal %d%s%s%s%s, seed %llu",
                (long long)s.B, (long long)s.H, (long long)s.kv_heads(), (long long)s.Tq, (long long)s.Tk, (long long)s.dk,
                (long long)s.dv, int(spec.causal), spec.key_length >= 0 ? ", key padding" : "",
                spec.allow_mask ? ", allow mask" : "", spec.blocked_to > spec.blocked_from ? ", blocked keys" : "",
                spec.positive_values ? ", v in [1,3]" : "", (unsigned long long)spec.seed);
  return text;
}

Shape shape(int64_t Tq, int64_t Tk, int64_t dk = 16, int64_t dv = 8, int64_t B = 1, int64_t H = 1, int64_t H_kv = 0) {
  Shape s;
  s.B = B;
  s.H = H;
  s.H_kv = H_kv;
  s.Tq = Tq;
  s.Tk = Tk;
  s.dk = dk;
  s.dv = dv;
  return s;
}

const Variant& correct_variant(const char* name) {
  for (const NamedVariant& named : correct_variants())
    if (std::strcmp(named.name, name) == 0) return named.variant;
  ADD_FAILURE() << "no correct variant " << name;
  static const Variant none;
  return none;
}

// Shapes around every tile and threshold of the two correct tiled variants: key tiles of 32 and
// 64, query tiles of 64 and 128, split-KV from 320 keys in chunks of 256, and empty chunks.
std::vector<Spec> tile_edge_specs() {
  using C = Causal;
  return {
      {.shape = shape(1, 1), .seed = 1},
      {.shape = shape(3, 63), .allow_mask = true, .seed = 2},
      {.shape = shape(1, 65, 64, 32), .key_length = 40, .seed = 3},
      {.shape = shape(65, 65), .causal = C::upper_left, .positive_values = true, .seed = 4},
      {.shape = shape(129, 129, 80, 16, 1, 2, 1), .causal = C::lower_right, .seed = 5},
      {.shape = shape(70, 319), .causal = C::lower_right, .key_length = 300, .seed = 6},
      {.shape = shape(200, 129), .causal = C::lower_right, .positive_values = true, .seed = 7},  // Tq > Tk
      {.shape = shape(1, 320, 128, 16), .allow_mask = true, .seed = 8},
      {.shape = shape(300, 320), .causal = C::upper_left, .seed = 9},  // rows below 256: chunk 2 empty
      {.shape = shape(130, 513, 16, 8, 2, 1), .causal = C::upper_left, .key_length = 200, .seed = 10},
      {.shape = shape(2, 513), .blocked_from = 256, .blocked_to = 512, .positive_values = true, .seed = 11},
      {.shape = shape(4, 1025, 256, 8), .allow_mask = true, .blocked_from = 0, .blocked_to = 256, .seed = 12},
      {.shape = shape(1, 1025, 32, 64), .causal = C::lower_right, .positive_values = true, .seed = 13},
      {.shape = shape(3, 1025), .causal = C::upper_left, .key_length = 700, .seed = 14},
  };
}

TEST(TiledVariants, CorrectOnesStayWithinTheBoundAcrossTileEdges) {
  for (const char* name : {"tiled_split_kv", "tiled_causal_skipping"}) {
    double worst = 0;
    std::string where;
    int cases = 0;
    for (const Spec& base : tile_edge_specs())
      for (uint64_t draw = 0; draw < 3; ++draw, ++cases) {
        Spec spec = base;
        spec.seed += 100 * draw;
        const Checked result = check(spec, correct_variant(name));
        EXPECT_LE(result.worst, 1) << name << ", " << describe(spec) << ": " << result.where;
        EXPECT_GT(result.elements, 0) << describe(spec);
        if (result.worst >= worst) {
          worst = result.worst;
          where = describe(spec) + ": " + result.where;
        }
      }
    std::printf("  %-24s largest error/bound %.3g over %d cases (%s)\n", name, worst, cases, where.c_str());
  }
}

// The suite's own generator (every value mix: wide logits, subnormals, ties, arbitrary bits with
// NaN and inf; masks, padding, both causal alignments, a bias, both empty-row policies) at lengths
// past the tiles: 1 to 140 (query tiles of 64 and 128, key tiles of 32 and 64) and 250 to 420
// (split-KV from 320 keys; its second chunk empty for causal rows below 256 and for short key lengths).
TEST(TiledVariants, CorrectOnesStayWithinTheBoundOnDrawnLongCases) {
  constexpr int kDrawn = 48;
  SeededChooser choose(20261201);
  double worst[2] = {0, 0};
  std::string where[2];
  const char* const names[2] = {"tiled_split_kv", "tiled_causal_skipping"};
  for (int n = 0; n < kDrawn; ++n) {
    const CaseLimits limits{.max_batch = 2,
                            .max_heads = 2,
                            .max_len = n % 2 ? 420 : 140,
                            .max_width = 40,
                            .min_heads = 1,
                            .min_len = n % 2 ? 250 : 1};
    const Case<float> c = draw_case<float>(choose, limits);
    for (int which = 0; which < 2; ++which) {
      const Checked result = check(c, correct_variant(names[which]), uint64_t(n));
      EXPECT_LE(result.worst, 1) << names[which] << ", drawn case " << n << " (" << c.mix << ", B " << c.shape.B << " H "
                                 << c.shape.H << " Tq " << c.shape.Tq << " Tk " << c.shape.Tk << " dk " << c.shape.dk << " dv "
                                 << c.shape.dv << ", causal " << int(c.causal) << "): " << result.where;
      if (result.worst >= worst[which]) {
        worst[which] = result.worst;
        where[which] = "case " + std::to_string(n) + ", " + c.mix + ": " + result.where;
      }
    }
  }
  for (int which = 0; which < 2; ++which)
    std::printf("  %-24s largest error/bound %.3g over %d drawn cases (%s)\n", names[which], worst[which], kDrawn,
                where[which].c_str());
}

// Each tile bug lives in the kernel of a correct tiled variant, differing only by its mutation,
// so that its failures show the correct kernel takes the same path at the same sizes.
TEST(TiledMutants, LiveInTheCorrectTiledKernels) {
  auto same_tiles = [](const Variant& a, const Variant& b) {
    return a.block == b.block && a.query_tile == b.query_tile && a.split_from == b.split_from && a.split_chunk == b.split_chunk &&
           a.exp2 == b.exp2 && a.reciprocal == b.reciprocal;
  };
  for (Mutation m : {Mutation::split_kv_merge_unscaled, Mutation::head_dim_tail_dropped, Mutation::decode_path_ignores_mask})
    EXPECT_TRUE(same_tiles(mutant(m), correct_variant("tiled_split_kv"))) << int(m);
  EXPECT_TRUE(same_tiles(mutant(Mutation::causal_tiles_assume_equal_size), correct_variant("tiled_causal_skipping")));
  EXPECT_EQ(mutant(Mutation::last_partial_key_tile_dropped).block, 128);
}

// The mutant within the bound on every spec of `fine`, and beyond it on every spec of `wrong`, each
// drawn with its seed and with two more.
void expect_size_dependent(Mutation mutation, const char* name, const std::vector<Spec>& fine, const std::vector<Spec>& wrong) {
  const Variant variant = mutant(mutation);
  for (const Spec& base : fine)
    for (uint64_t draw = 0; draw < 3; ++draw) {
      Spec spec = base;
      spec.seed += 100 * draw;
      const Checked result = check(spec, variant);
      EXPECT_LE(result.worst, 1) << name << " below its threshold, " << describe(spec) << ": " << result.where;
    }
  for (const Spec& base : wrong) {
    double least = INFINITY;
    for (uint64_t draw = 0; draw < 3; ++draw) {
      Spec spec = base;
      spec.seed += 100 * draw;
      const Checked result = check(spec, variant);
      EXPECT_GT(result.worst, 1) << name << " at a triggering shape, " << describe(spec) << ": " << result.where;
      least = std::min(least, result.worst);
    }
    std::printf("  %-30s %-72s error/bound at least %.3g\n", name, describe(base).c_str(), least);
  }
}

TEST(TiledMutants, LastPartialKeyTileDropped) {
  expect_size_dependent(Mutation::last_partial_key_tile_dropped, "last_partial_key_tile_dropped",
                        {{.shape = shape(3, 100), .positive_values = true, .seed = 21},
                         {.shape = shape(3, 128), .positive_values = true, .seed = 22},
                         {.shape = shape(3, 256), .causal = Causal::lower_right, .positive_values = true, .seed = 23}},
                        {{.shape = shape(3, 129), .positive_values = true, .seed = 24},
                         {.shape = shape(3, 200), .positive_values = true, .seed = 25},
                         {.shape = shape(2, 1023, 64, 64), .seed = 26}});
}

TEST(TiledMutants, SplitKvMergeUnscaled) {
  expect_size_dependent(
      Mutation::split_kv_merge_unscaled, "split_kv_merge_unscaled",
      {{.shape = shape(3, 319), .positive_values = true, .seed = 31},
       {.shape = shape(1, 319, 64, 16), .allow_mask = true, .positive_values = true, .seed = 32}},
      {{.shape = shape(3, 320), .positive_values = true, .seed = 33}, {.shape = shape(1, 1025, 64, 16), .seed = 34}});
}

TEST(TiledMutants, CausalTilesAssumeEqualSize) {
  expect_size_dependent(Mutation::causal_tiles_assume_equal_size, "causal_tiles_assume_equal_size",
                        {{.shape = shape(32, 32), .causal = Causal::upper_left, .positive_values = true, .seed = 41},
                         {.shape = shape(32, 100), .causal = Causal::lower_right, .positive_values = true, .seed = 42},
                         {.shape = shape(20, 9), .causal = Causal::lower_right, .positive_values = true, .seed = 43},
                         {.shape = shape(200, 200), .positive_values = true, .seed = 44}},
                        {{.shape = shape(33, 33), .causal = Causal::upper_left, .positive_values = true, .seed = 45},
                         {.shape = shape(65, 65), .causal = Causal::upper_left, .seed = 46},
                         {.shape = shape(129, 300), .causal = Causal::lower_right, .seed = 47}});
}

TEST(TiledMutants, HeadDimTailDropped) {
  expect_size_dependent(Mutation::head_dim_tail_dropped, "head_dim_tail_dropped",
                        {{.shape = shape(3, 40, 64, 8), .positive_values = true, .seed = 51},
                         {.shape = shape(3, 40, 63, 8), .positive_values = true, .seed = 52},
                         {.shape = shape(3, 40, 96, 8), .positive_values = true, .seed = 53},
                         {.shape = shape(3, 40, 256, 8), .positive_values = true, .seed = 54}},
                        {{.shape = shape(3, 40, 65, 8), .positive_values = true, .seed = 55},
                         {.shape = shape(3, 40, 80, 8), .seed = 56},
                         {.shape = shape(3, 40, 112, 8), .seed = 57}});
}

TEST(TiledMutants, DecodePathIgnoresMask) {
  expect_size_dependent(Mutation::decode_path_ignores_mask, "decode_path_ignores_mask",
                        {{.shape = shape(2, 65), .key_length = 40, .allow_mask = true, .positive_values = true, .seed = 61},
                         {.shape = shape(2, 400), .key_length = 300, .positive_values = true, .seed = 62},
                         {.shape = shape(1, 65), .causal = Causal::upper_left, .positive_values = true, .seed = 63}},
                        {{.shape = shape(1, 65), .key_length = 40, .positive_values = true, .seed = 64},
                         {.shape = shape(1, 400), .allow_mask = true, .seed = 65}});
}

TEST(TiledMutants, RunningSumFp16LongContext) {
  expect_size_dependent(
      Mutation::running_sum_fp16_long_context, "running_sum_fp16_long_context",
      {{.shape = shape(2, 1024), .positive_values = true, .seed = 71}, {.shape = shape(2, 1024, 64, 8), .seed = 72}},
      {{.shape = shape(2, 1025), .positive_values = true, .seed = 73}, {.shape = shape(2, 2048, 64, 8), .seed = 74}});
}

}  // namespace
}  // namespace attncheck
