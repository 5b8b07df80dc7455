// Plugin ABIs v1 and v2: the built-in implementation through v2, a v1 plugin and its v2 twin
// agreeing, and each way loading must fail clearly.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/attention.hpp"
#include "attncheck/plugin_loader.hpp"

namespace attncheck {
namespace {

// B 2, H 3, Tq 4, Tk 5, dk 6, dv 7, causal lower-right, one allow entry cleared, in T.
template <class T>
struct AbiCase {
  std::vector<T> q, k, v;
  std::vector<uint8_t> allow = std::vector<uint8_t>(2 * 4 * 5, 1);
  attncheck_problem abi{2, 3, 4, 5, 6, 7, nullptr, nullptr, nullptr, nullptr, 0, 0, nullptr};
  AbiCase() {
    std::mt19937_64 rng(7);
    for (auto* x : {&q, &k, &v}) {
      x->resize(x == &q ? 2 * 3 * 4 * 6 : x == &k ? 2 * 3 * 5 * 6 : 2 * 3 * 5 * 7);
      for (T& e : *x) e = T(double(rng() >> 11) * 0x1p-53 - 0.5);
    }
    allow[7] = 0;
    abi.q = q.data();
    abi.k = k.data();
    abi.v = v.data();
    abi.allow = allow.data();
    abi.causal = 2;
  }
  // The same problem through the C++ API, written to out [B,H,Tq,dv].
  void direct(std::vector<T>& out) const {
    Problem<T> p;
    p.shape = {2, 3, 4, 5, 6, 7};
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.masks = {allow.data(), Causal::lower_right};
    out.assign(2 * 3 * 4 * 7, 0);
    attention(p, Result<T>{out.data()});
  }
};

// The case through ABI v2, with grouped KV heads (H 3, H_kv 1: every query head reads the first
// head's keys and values) and key lengths, against the C++ API, out and lse.
template <class T>
void expect_v2_same_as_direct(const Plugin& plugin) {
  AbiCase<T> c;
  const std::vector<int32_t> lengths = {5, 3};
  Problem<T> p;
  p.shape = {2, 3, 4, 5, 6, 7, 1};
  p.q = c.q.data();
  p.k = c.k.data();
  p.v = c.v.data();
  p.masks = {c.allow.data(), Causal::lower_right, lengths.data()};
  std::vector<T> out(2 * 3 * 4 * 7, -1), lse(2 * 3 * 4, -1), direct_out(out.size()), direct_lse(lse.size());
  NarrowBuffers narrow;
  const attncheck_problem_v2 abi = to_abi_v2(p, out.data(), lse.data(), narrow);
  ASSERT_EQ(plugin.forward_v2(&abi), 0);
  attention(p, Result<T>{direct_out.data(), nullptr, direct_lse.data()});
  EXPECT_EQ(std::memcmp(out.data(), direct_out.data(), out.size() * sizeof(T)), 0);
  EXPECT_EQ(std::memcmp(lse.data(), direct_lse.data(), lse.size() * sizeof(T)), 0);
}

TEST(PluginLoader, BuiltinInProcessMatchesTheCppApiBitForBit) {
  const Plugin plugin = load_plugin("builtin");
  EXPECT_EQ(plugin.version, 2);
  expect_v2_same_as_direct<float>(plugin);
  expect_v2_same_as_direct<double>(plugin);
}

TEST(PluginLoader, BuiltinSharedLibraryMatchesTheCppApiBitForBit) {
  const Plugin plugin = load_plugin(BUILTIN_SO);
  ASSERT_TRUE(plugin.has_f64());
  EXPECT_TRUE(plugin.capabilities & ATTNCHECK_CAP_LSE);
  expect_v2_same_as_direct<float>(plugin);
  expect_v2_same_as_direct<double>(plugin);
}

// f16 and bf16 cross ABI v2 as bit patterns: the built-in plugin, given q, k, v and bias rounded to
// the format, returns the C++ API's float result on the same values rounded once to the format, and
// lse in float.
TEST(PluginLoader, NarrowFormatsCrossAsBitPatterns) {
  for (const char* path : {BUILTIN_SO, "builtin"})
    for (Format format : {Format::f16, Format::bf16}) {
      SCOPED_TRACE(std::string(path) + " " + format_name(format));
      const Plugin plugin = load_plugin(path);
      ASSERT_TRUE(plugin.capabilities & capability_of(format));
      AbiCase<float> c;
      for (std::vector<float>* x : {&c.q, &c.k, &c.v})
        for (float& e : *x) e = float(round_to(format, e * 3.7));
      std::vector<float> bias(2 * 3 * 4 * 5);
      for (size_t n = 0; n < bias.size(); ++n) bias[n] = float(round_to(format, 0.3 * double(n % 7) - 1));
      Problem<float> p = from_abi<float>(c.abi);
      p.bias = bias.data();
      p.format = format;
      ASSERT_EQ(problem_error(p, Result<float>{c.q.data()}), "");
      std::vector<float> out(2 * 3 * 4 * 7, -1), lse(2 * 3 * 4, -1), direct_out(out.size()), direct_lse(lse.size());
      NarrowBuffers narrow;
      const attncheck_problem_v2 abi = to_abi_v2(p, out.data(), lse.data(), narrow);
      EXPECT_EQ(abi.dtype, int32_t(format));
      EXPECT_NE(abi.q, (const void*)c.q.data());  // the bits, not the floats
      ASSERT_EQ(plugin.forward_v2(&abi), 0);
      widen_outputs<float>(p.format, narrow);
      attention(p, Result<float>{direct_out.data(), nullptr, direct_lse.data()});
      EXPECT_EQ(std::memcmp(out.data(), direct_out.data(), out.size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(lse.data(), direct_lse.data(), lse.size() * sizeof(float)), 0);
      for (float x : out) EXPECT_EQ(double(x), round_to(format, x));
      Problem<float> in_float = p;
      in_float.format = Format::f32;
      std::vector<float> float_out(out.size());
      attention(in_float, Result<float>{float_out.data()});
      EXPECT_NE(float_out, out) << "the output is rounded to the format";
    }
}

TEST(PluginLoader, AValueOutsideItsFormatIsRefused) {
  AbiCase<float> c;
  Problem<float> p = from_abi<float>(c.abi);
  p.format = Format::bf16;
  c.k[3] = 1 + 0x1p-10f;  // not a bfloat16: 8 significant bits
  for (float& x : c.q) x = float(round_to<BFloat16>(x));
  for (float& x : c.v) x = float(round_to<BFloat16>(x));
  std::vector<float> out(2 * 3 * 4 * 7);
  EXPECT_EQ(problem_error(p, Result<float>{out.data()}), "k holds a value that is not a bfloat16 (format bfloat16)");
  c.k[3] = 1;
  for (float& x : c.k) x = float(round_to<BFloat16>(x));
  EXPECT_EQ(problem_error(p, Result<float>{out.data()}), "");
  Problem<double> in_double = from_abi<double>(c.abi);
  in_double.format = Format::f16;
  EXPECT_NE(problem_error(in_double, Result<double>{nullptr}), "");
}

// A v1 plugin still loads and computes: the two-pass variant through v1 and through v2 agree.
TEST(PluginLoader, AbiV1PluginAndItsV2TwinAgree) {
  const Plugin v1 = load_plugin(TWO_PASS_V1_SO), v2 = load_plugin(TWO_PASS_SO);
  EXPECT_EQ(v1.version, 1);
  EXPECT_EQ(v1.capabilities, kAbiV1Capabilities | ATTNCHECK_CAP_F64);
  AbiCase<float> c;
  std::vector<float> by_v1(2 * 3 * 4 * 7, -1), by_v2(by_v1.size(), -2);
  c.abi.out = by_v1.data();
  ASSERT_EQ(v1.forward_f32(&c.abi), 0);
  Problem<float> p = from_abi<float>(c.abi);
  NarrowBuffers narrow;
  const attncheck_problem_v2 abi = to_abi_v2(p, by_v2.data(), (float*)nullptr, narrow);
  ASSERT_EQ(v2.forward_v2(&abi), 0);
  EXPECT_EQ(std::memcmp(by_v1.data(), by_v2.data(), by_v1.size() * sizeof(float)), 0);
}

TEST(PluginLoader, BuiltinRefusesMalformedProblems) {
  const Plugin plugin = load_plugin(BUILTIN_SO);
  AbiCase<float> c;
  std::vector<float> out(2 * 3 * 4 * 7);
  NarrowBuffers narrow;
  attncheck_problem_v2 abi = to_abi_v2(from_abi<float>(c.abi), out.data(), (float*)nullptr, narrow);
  const attncheck_problem_v2 good = abi;
  abi.d_k = 0;
  EXPECT_NE(plugin.forward_v2(&abi), 0);
  abi = good;
  abi.causal = 7;
  EXPECT_NE(plugin.forward_v2(&abi), 0);
  abi = good;
  abi.kv_heads = 2;  // does not divide 3
  EXPECT_NE(plugin.forward_v2(&abi), 0);
  abi = good;
  abi.window_left = -2;
  EXPECT_NE(plugin.forward_v2(&abi), 0);
  abi = good;
  abi.dtype = 7;  // no format
  EXPECT_EQ(plugin.forward_v2(&abi), 4);
  abi = good;
  abi.size = 8;  // older than the layout it reads
  EXPECT_NE(plugin.forward_v2(&abi), 0);
  abi = good;
  abi.out = nullptr;
  EXPECT_NE(plugin.forward_v2(&abi), 0);
  EXPECT_NE(plugin.forward_v2(nullptr), 0);
  EXPECT_EQ(plugin.forward_v2(&good), 0);
}

// The reason load_plugin gives for `path`, or "" if it loaded.
std::string load_error(const std::string& path) {
  try {
    load_plugin(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(PluginLoader, EachLoadingFaultHasAOneLineReason) {
  const std::pair<std::string, std::string> cases[] = {
      {"/nonexistent/plugin.so", "cannot load plugin"},
      {NOT_A_PLUGIN_SO, "no attncheck_abi_version"},
      {WRONG_VERSION_SO, "ABI version 2 without attncheck_capabilities"},
      {NO_FORWARD_SO, "no attncheck_forward_f32"},
  };
  for (const auto& [path, reason] : cases) {
    const std::string error = load_error(path);
    EXPECT_NE(error.find(reason), std::string::npos) << path << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace attncheck
