// Properties run on hand-made cases, each the one that shows a finding or its absence.
// Real third-party kernels: PyTorch 1.13's own CPU attention (tools/tests/third_party/
// torch_sdpa_plugin.cpp) must be caught on each of its contract bugs, each by the property whose
// claim it breaks; a careful two-pass kernel on SLEEF's exps must pass the same cases (only key 1
// is permitted, so the correct output is v_1 = 2 whatever happens to key 0). And a correct kernel
// run with denormals-are-zero passes `check`'s property on the case `compare` passes too.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "attncheck/kernel.hpp"
#include "attncheck/property.hpp"

namespace attncheck {
namespace {

// A property run on one hand-made case (what draw() returns) with hand-picked choices (what
// below() returns, in order; 0 once they run out), the kernel in this process.
class ScriptedChecker : public Checker {
 public:
  ScriptedChecker(const Kernel& kernel, Case<float> c, std::vector<uint64_t> choices)
      : kernel_(kernel), case_(std::move(c)), choices_(std::move(choices)) {}
  uint64_t below(uint64_t n) override {
    const uint64_t x = next_ < choices_.size() ? choices_[next_++] : 0;
    return n == 0 ? 0 : std::min(x, n - 1);
  }
  // A plain forward alone: out [B,H,Tq,dv].
  Results<float> run(const Call<float>& call) override {
    if (call.kind != CallKind::forward || call.asked) lacks(call);
    Results<float> r;
    if (run_kernel(kernel_, *call.forward, r.tensor[slot::OUT]) != 0) fail("refused");
    return r;
  }
  Results<double> run(const Call<double>&) override { throw std::logic_error("no double case here"); }
  bool has_f64() const override { return false; }
  CaseLimits limits(CaseLimits base) const override { return kernel_.limits(base); }
  [[noreturn]] void fail(const std::string& message) override { throw std::runtime_error(message); }

 protected:
  Case<float> draw_f32(const CaseLimits&) override { return case_; }
  Case<double> draw_f64(const CaseLimits&) override { throw std::logic_error("no double case here"); }

 private:
  const Kernel& kernel_;
  Case<float> case_;
  std::vector<uint64_t> choices_;
  size_t next_ = 0;
};

// B 1, H 1, Tq 1, Tk 2, dk 2, dv 1: q = [1, 0], k = [[10, 0], [0, 0]], v = [1, 2], key 0 masked out.
Case<float> key_zero_masked() {
  Case<float> c;
  c.shape = {1, 1, 1, 2, 2, 1};
  c.q = {1, 0};
  c.k = {10, 0, 0, 0};
  c.v = {1, 2};
  c.allow = {0, 1};
  c.mix = "hand-made";
  return c;
}

// The failure message of `property` on the case and choices, or "" when it holds.
std::string failure(const char* plugin, const char* property, const Case<float>& c, std::vector<uint64_t> choices) {
  static std::map<std::string, Kernel> kernels;
  if (!kernels.count(plugin)) kernels.emplace(plugin, load_kernel(plugin));
  ScriptedChecker checker(kernels.at(plugin), c, std::move(choices));
  for (const Property& p : all_properties())
    if (std::string(p.name) == property) try {
        p.check(checker);
        return "";
      } catch (const std::runtime_error& e) {
        return e.what();
      }
  throw std::logic_error(std::string("no property ") + property);
}

// ForbiddenKeysAndValuesCannotChangeValidOutputs's choices: the first query with forbidden keys, what to poison
// (0 values, 1 keys, 2 both), then the poison of each forbidden key (0 NaN, 1 inf, 3 1e30).
struct Bug {
  const char* name;
  const char* property;
  Case<float> c;
  std::vector<uint64_t> choices;
  const char* caught_as;  // in the torch plugin's failure message
};

std::vector<Bug> torch_bugs() {
  Case<float> empty = key_zero_masked();
  Case<float> big_q = key_zero_masked();
  big_q.q = {1e10f, 0};  // key 0 poisoned with 1e30 scores 7e39: +inf in float, and +inf + -inf = NaN
  return {
      {"a row with no permitted key gives NaN",
       "EmptyRowsFollowThePolicy",
       empty,
       {0, 0},
       "gives -nan under --empty-rows zero (--empty-rows nan would accept it)"},
      {"NaN in a masked-out value leaks through 0 * NaN",
       "ForbiddenKeysAndValuesCannotChangeValidOutputs",
       key_zero_masked(),
       {0, 0, 0},
       "the values of keys it may not see were poisoned (key 0: nan): out[0,0,0,0] 2 became "},
      {"inf in a masked-out value leaks through 0 * inf",
       "ForbiddenKeysAndValuesCannotChangeValidOutputs",
       key_zero_masked(),
       {0, 0, 1},
       "the values of keys it may not see were poisoned (key 0: inf): out[0,0,0,0] 2 became "},
      {"a NaN masked-out key poisons its row through the additive mask",
       "ForbiddenKeysAndValuesCannotChangeValidOutputs",
       key_zero_masked(),
       {0, 1, 0},
       "only keys it may not see were poisoned (key 0: nan): out[0,0,0,0] 2 became "},
      {"a masked-out key whose score overflows gives +inf + -inf",
       "ForbiddenKeysAndValuesCannotChangeValidOutputs",
       big_q,
       {0, 1, 3},
       "only keys it may not see were poisoned (key 0: 1.00000002e+30): out[0,0,0,0] 2 became "},
  };
}

// examples/compare/flush_*.npy as a case: q the largest float subnormal, k = [1e34, 0], v = [1, 0].
TEST(HandMadeCases, FlushedSubnormalCasePassesCheckAsItPassesCompare) {
  const Case<float> c = flushed_subnormal_case();
  for (const char* plugin : {FLUSH_SUBNORMALS_SO, FAST_MATH_LINKED_SO})
    EXPECT_EQ(failure(plugin, "AgreesWithOracleInFloat", c, {}), "") << plugin;
}

#ifdef TORCH_SO
TEST(HandMadeCases, PyTorch113EachContractBugIsCaughtByThePropertyThatNamesIt) {
  for (const Bug& bug : torch_bugs()) {
    const std::string message = failure(TORCH_SO, bug.property, bug.c, bug.choices);
    EXPECT_NE(message.find(bug.caught_as), std::string::npos) << bug.name << ", Property." << bug.property << " said:\n"
                                                              << message;
  }
}
#endif

#ifdef SLEEF_SO
TEST(HandMadeCases, SleefTwoPassKernelPassesTheSameCases) {
  for (const Bug& bug : torch_bugs()) EXPECT_EQ(failure(SLEEF_SO, bug.property, bug.c, bug.choices), "") << bug.name;
}
#endif

}  // namespace
}  // namespace attncheck
