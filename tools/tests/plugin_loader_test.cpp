// Plugin ABI v1: the built-in implementation through it, and each way loading must fail clearly.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

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

template <class T>
void expect_same_as_direct(int32_t (*forward)(const attncheck_problem*)) {
  AbiCase<T> c;
  std::vector<T> via_abi(2 * 3 * 4 * 7, -1), direct;
  c.abi.out = via_abi.data();
  ASSERT_EQ(forward(&c.abi), 0);
  c.direct(direct);
  EXPECT_EQ(std::memcmp(via_abi.data(), direct.data(), direct.size() * sizeof(T)), 0);
}

TEST(PluginLoader, BuiltinInProcessMatchesTheCppApiBitForBit) {
  const Plugin plugin = load_plugin("builtin");
  expect_same_as_direct<float>(plugin.forward_f32);
  expect_same_as_direct<double>(plugin.forward_f64);
}

TEST(PluginLoader, BuiltinSharedLibraryMatchesTheCppApiBitForBit) {
  const Plugin plugin = load_plugin(BUILTIN_SO);
  ASSERT_NE(plugin.forward_f64, nullptr);
  expect_same_as_direct<float>(plugin.forward_f32);
  expect_same_as_direct<double>(plugin.forward_f64);
}

TEST(PluginLoader, BuiltinRefusesMalformedProblems) {
  const Plugin plugin = load_plugin(BUILTIN_SO);
  AbiCase<float> c;
  std::vector<float> out(2 * 3 * 4 * 7);
  c.abi.out = out.data();
  c.abi.d_k = 0;
  EXPECT_NE(plugin.forward_f32(&c.abi), 0);
  c.abi.d_k = 6;
  c.abi.causal = 7;
  EXPECT_NE(plugin.forward_f32(&c.abi), 0);
  c.abi.causal = 0;
  c.abi.out = nullptr;
  EXPECT_NE(plugin.forward_f32(&c.abi), 0);
  EXPECT_NE(plugin.forward_f32(nullptr), 0);
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
      {WRONG_VERSION_SO, "ABI version 2"},
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
