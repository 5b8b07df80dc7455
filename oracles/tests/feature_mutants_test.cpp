// The planted bugs of the features beyond ABI v1 (grouped KV heads, sliding windows, soft-caps)
// against the oracle, on small hand-built cases: each mutant lands outside the oracle's bound on a
// case that exercises its bug, while every correct variant stays within it there; and on cases
// that do not exercise it (H_kv = H, no window, no cap, ...) the mutant stays within the bound and
// computes exactly what the correct two-pass kernel computes, bit for bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"
#include "variant.hpp"

namespace attncheck {
namespace {

using M = Mutation;

// A small case: its shape and features; values drawn from the seed. B 1 unless told.
struct Spec {
  int64_t H = 2, H_kv = 0, Tq = 8, Tk = 8;  // dk 8, dv 4
  Causal causal = Causal::none;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0;
  uint64_t seed = 1;
  int64_t B = 1;
  std::vector<int32_t> key_lengths = {};  // [B] or none
};

// q normal times 2 (scores of a few units, so that caps of 1 to 5 bite), k and v normal.
Case<float> build(const Spec& spec) {
  SeededChooser choose(spec.seed);
  Case<float> c;
  c.shape = {.B = spec.B, .H = spec.H, .Tq = spec.Tq, .Tk = spec.Tk, .dk = 8, .dv = 4, .H_kv = spec.H_kv};
  c.key_lengths = spec.key_lengths;
  c.causal = spec.causal;
  c.window_left = spec.window_left;
  c.window_right = spec.window_right;
  c.softcap = spec.softcap;
  const Shape& s = c.shape;
  c.q.resize(size_t(s.q_size()));
  c.k.resize(size_t(s.k_size()));
  c.v.resize(size_t(s.v_size()));
  for (float& x : c.q) x = float(2 * standard_normal(choose));
  for (float& x : c.k) x = float(standard_normal(choose));
  for (float& x : c.v) x = float(standard_normal(choose));
  return c;
}

std::string describe(const Spec& spec) {
  char text[200];
  std::snprintf(text, sizeof text, "H %lld H_kv %lld Tq %lld Tk %lld, causal %d, window %lld,%lld, soft-cap %g, seed %llu",
                (long long)spec.H, (long long)(spec.H_kv > 0 ? spec.H_kv : spec.H), (long long)spec.Tq, (long long)spec.Tk,
                int(spec.causal), (long long)spec.window_left, (long long)spec.window_right, spec.softcap,
                (unsigned long long)spec.seed);
  return text;
}

std::vector<float> run(const Case<float>& c, const Variant& variant) {
  std::vector<float> out(size_t(c.shape.out_size()), -12345.f);
  variant_attention(c.problem(), out.data(), variant);
  return out;
}

// The mutant is outside the oracle's bound on the spec's case; every correct variant is within it.
void expect_caught(Mutation mutation, const Spec& spec) {
  const Case<float> c = build(spec);
  const Reference ref = reference(c.problem());
  const Comparison mutant_result = compare(run(c, mutant(mutation)).data(), ref.out);
  EXPECT_FALSE(mutant_result.ok()) << describe(spec) << ": the mutant passes: " << mutant_result.summary();
  for (const NamedVariant& named : correct_variants()) {
    const Comparison correct = compare(run(c, named.variant).data(), ref.out);
    EXPECT_TRUE(correct.ok()) << named.name << ", " << describe(spec) << ":\n" << correct.report("float32");
  }
}

// The mutant is within the oracle's bound on the spec's case, with the correct two-pass kernel's bits.
void expect_coincides(Mutation mutation, const Spec& spec) {
  const Case<float> c = build(spec);
  const Reference ref = reference(c.problem());
  const std::vector<float> out = run(c, mutant(mutation)), two_pass = run(c, Variant{});
  const Comparison result = compare(out.data(), ref.out);
  EXPECT_TRUE(result.ok()) << describe(spec) << ":\n" << result.report("float32");
  EXPECT_EQ(std::memcmp(out.data(), two_pass.data(), out.size() * sizeof(float)), 0)
      << describe(spec) << ": the mutant differs from the two-pass kernel";
}

TEST(FeatureMutants, GqaHeadsInterleaved) {
  expect_caught(M::gqa_heads_interleaved, {.H = 4, .H_kv = 2});  // head 1 reads KV head 1, not 0
  expect_caught(M::gqa_heads_interleaved, {.H = 6, .H_kv = 3, .Tq = 3, .Tk = 5, .causal = Causal::lower_right, .seed = 2});
  expect_coincides(M::gqa_heads_interleaved, {.H = 4, .H_kv = 4});
  expect_coincides(M::gqa_heads_interleaved, {.H = 4, .H_kv = 1});
  expect_coincides(M::gqa_heads_interleaved, {.H = 1, .H_kv = 1, .seed = 3});
}

TEST(FeatureMutants, GqaGroupPowerOfTwo) {
  expect_caught(M::gqa_group_power_of_two, {.H = 6, .H_kv = 2});  // group 3 taken as 2: head 2 reads KV head 1
  expect_caught(M::gqa_group_power_of_two, {.H = 12, .H_kv = 2, .Tq = 2, .Tk = 3, .seed = 2});  // group 6 as 4
  expect_coincides(M::gqa_group_power_of_two, {.H = 8, .H_kv = 2});                             // group 4
  expect_coincides(M::gqa_group_power_of_two, {.H = 3, .H_kv = 1});                             // one KV head: the clamp hides it
  expect_coincides(M::gqa_group_power_of_two, {.H = 3, .H_kv = 3});
}

TEST(FeatureMutants, WindowExclusive) {
  expect_caught(M::window_exclusive, {.window_left = 2, .window_right = 0});
  expect_caught(M::window_exclusive, {.Tq = 4, .Tk = 12, .window_left = -1, .window_right = 1, .seed = 2});
  expect_coincides(M::window_exclusive, {});
  expect_coincides(M::window_exclusive, {.causal = Causal::lower_right});
  expect_coincides(M::window_exclusive, {.window_left = 10, .window_right = 10});  // bounds past every key
}

TEST(FeatureMutants, WindowExcludesCurrent) {
  expect_caught(M::window_excludes_current, {.window_left = 3, .window_right = 0});
  expect_caught(M::window_excludes_current, {.Tq = 5, .Tk = 9, .window_left = 1, .window_right = 1, .seed = 2});
  expect_coincides(M::window_excludes_current, {});
  expect_coincides(M::window_excludes_current, {.causal = Causal::upper_left, .seed = 3});
}

TEST(FeatureMutants, WindowRightDropped) {
  expect_caught(M::window_right_dropped, {.window_left = 2, .window_right = 1});
  expect_caught(M::window_right_dropped, {.Tq = 3, .Tk = 7, .window_left = -1, .window_right = 0, .seed = 2});
  expect_coincides(M::window_right_dropped, {.window_left = 3, .window_right = -1});
  // Under a lower-right causal mask a right bound of 0 or more forbids nothing more.
  expect_coincides(M::window_right_dropped, {.causal = Causal::lower_right, .window_left = 2, .window_right = 1});
  expect_coincides(M::window_right_dropped, {});
}

TEST(FeatureMutants, WindowUpperLeft) {
  expect_caught(M::window_upper_left, {.Tq = 4, .Tk = 10, .window_left = 2, .window_right = 0});
  expect_caught(M::window_upper_left, {.Tq = 9, .Tk = 5, .window_left = 1, .window_right = 1, .seed = 2});
  expect_coincides(M::window_upper_left, {.window_left = 2, .window_right = 1});  // Tq = Tk
  expect_coincides(M::window_upper_left, {.Tq = 4, .Tk = 10});                    // no window
}

TEST(FeatureMutants, SoftcapAfterMask) {
  expect_caught(M::softcap_after_mask, {.causal = Causal::lower_right, .softcap = 2});
  expect_caught(M::softcap_after_mask, {.Tq = 3, .Tk = 9, .window_left = 1, .window_right = 0, .softcap = 5, .seed = 2});
  expect_coincides(M::softcap_after_mask, {.causal = Causal::lower_right});  // no cap
  expect_coincides(M::softcap_after_mask, {.softcap = 2});                   // nothing masked
}

TEST(FeatureMutants, SoftcapSTanhS) {
  expect_caught(M::softcap_s_tanh_s, {.softcap = 5});
  expect_caught(M::softcap_s_tanh_s, {.H = 3, .Tq = 2, .Tk = 16, .causal = Causal::upper_left, .softcap = 30, .seed = 2});
  expect_coincides(M::softcap_s_tanh_s, {});
  expect_coincides(M::softcap_s_tanh_s, {.causal = Causal::lower_right, .window_left = 2, .window_right = 0, .seed = 3});
}

TEST(FeatureMutants, SoftcapIgnored) {
  expect_caught(M::softcap_ignored, {.softcap = 1});
  expect_caught(M::softcap_ignored, {.Tq = 4, .Tk = 6, .causal = Causal::upper_left, .softcap = 2, .seed = 2});
  expect_coincides(M::softcap_ignored, {});
  expect_coincides(M::softcap_ignored, {.causal = Causal::upper_left, .seed = 3});
}

// Key lengths: the batch's longest read for every sequence (flash-attention 1192, 1455) lets a
// shorter sequence see its padding; with equal lengths nothing changes.
TEST(FeatureMutants, KvLensBatchMax) {
  expect_caught(M::kv_lens_batch_max, {.B = 2, .key_lengths = {3, 8}});
  expect_caught(M::kv_lens_batch_max,
                {.Tq = 4, .Tk = 6, .causal = Causal::lower_right, .seed = 2, .B = 3, .key_lengths = {6, 1, 4}});
  expect_coincides(M::kv_lens_batch_max, {.B = 2, .key_lengths = {5, 5}});
  expect_coincides(M::kv_lens_batch_max, {});
}

}  // namespace
}  // namespace attncheck
