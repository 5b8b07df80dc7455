// properties_test: every property of the registry as a GoogleTest Property.<name>; generated ones
// run under RapidCheck (RC_PARAMS: seed, reproduce, ...), fixed ones once. The implementation under
// test runs in this process: $ATTNCHECK_IMPL, else the built-in one.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <stdexcept>

#include "attncheck/case_shrink.hpp"
#include "attncheck/features.hpp"
#include "attncheck/kernel.hpp"
#include "attncheck/property.hpp"

namespace attncheck {

// How RapidCheck prints a case in a counterexample.
template <class T>
void showValue(const Case<T>& c, std::ostream& os) {
  os << describe(c);
}

namespace {

// Choices from RapidCheck: each shrinks toward 0, so counterexamples shrink to small shapes and
// plain values (zeros, small integers).
struct RcChooser : Chooser {
  uint64_t below(uint64_t n) override { return n <= 1 ? 0 : *rc::gen::inRange<uint64_t>(0, n); }
};

// The kernel from the environment, in this process.
class InProcessChecker : public Checker {
 public:
  Results<float> run(const Call<float>& call) override { return run_checked(call); }
  Results<double> run(const Call<double>& call) override { return run_checked(call); }
  bool has_f64() const override { return kernel_from_environment().plugin.has_f64(); }
  bool has_lse() const override { return kernel_from_environment().has_lse(); }
  CaseLimits limits(CaseLimits base) const override { return kernel_from_environment().limits(base); }

 private:
  template <class T>
  Results<T> run_checked(const Call<T>& call) {
    // A forward's out [B,H,Tq,dv], lse [B,H,Tq] and keep [B,H,Tq,Tk] when asked; a backward's dq
    // [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv]; a layer's out [B,Tq,D], weights [B,H,Tq,Tk] when asked.
    const Kernel& kernel = kernel_from_environment();
    Results<T> r;
    switch (call.kind) {
      case CallKind::forward:
        settle(claimed_call([&] {
                 return run_kernel(kernel, *call.forward, r.tensor[slot::OUT], r.if_asked(call, slot::LSE),
                                   r.bytes_if_asked(call, slot::KEEP));
               }),
               "the kernel refused a valid problem", *call.forward);
        break;
      case CallKind::backward:
        settle(claimed_call([&] { return run_kernel_backward(kernel, *call.forward, gradients_into(call, r)); }),
               "the kernel's backward refused a valid problem", *call.forward);
        break;
      case CallKind::layer:
        settle(claimed_call([&] {
                 return run_kernel_layer(kernel, *call.layer, r.tensor[slot::LAYER_OUT], r.if_asked(call, slot::WEIGHTS));
               }),
               "the kernel's layer refused a valid layer", *call.layer);
        break;
    }
    return r;
  }
  // Fails the property on a refusal (`refused`, with its status), then on a change to the
  // floating-point mode the call made.
  template <class C>
  void settle(int32_t status, const char* refused, const C& c) {
    if (status != 0) fail(std::string(refused) + " (status " + std::to_string(status) + ")\n" + describe(c));
    // Each property sees a call that changed the process's floating-point mode (ctest runs each
    // property in a process of its own, so the last test alone would see only the loading).
    fp_mode_unchanged(c);
  }
  // A call the harness should never have made (an unclaimed feature) fails the test as the
  // harness's error, named so, not as the kernel's (RapidCheck and FixedChecker report the throw).
  template <class F>
  int32_t claimed_call(F call) {
    try {
      return call();
    } catch (const UnclaimedFeature& unclaimed) {
      throw std::runtime_error(harness_error(testing::UnitTest::GetInstance()->current_test_info()->name(), unclaimed));
    }
  }
  template <class C>
  void fp_mode_unchanged(const C& c) {
    if (const std::string& change = kernel_from_environment().fp_mode_call_finding; !change.empty())
      fail("floating-point mode: " + change + "\n" + describe(c));
  }
};

// A case as a RapidCheck value: drawn from RapidCheck's choices, shrunk as a case (case_shrink.hpp:
// batches, heads, queries, keys and columns removed, options cleared, values made plain), as the
// campaign shrinks one, so that a counterexample here is as small as `attncheck check` finds it.
template <class T>
rc::Gen<Case<T>> cases(const CaseLimits& limits) {
  return rc::Gen<Case<T>>([limits](const rc::Random& random, int size) {
    Case<T> drawn = rc::gen::exec([limits] {
                      RcChooser choose;
                      return draw_case<T>(choose, limits);
                    })(random, size)
                        .value();
    return rc::shrinkable::shrinkRecur(std::move(drawn), [limits](const Case<T>& c) {
      std::vector<Case<T>> simpler;
      offer_simpler<T>(
          c, limits.capabilities,
          [&](Case<T>&& s) {
            simpler.push_back(std::move(s));
            return false;  // every neighbour, in order: RapidCheck tries them
          },
          limits.domain);
      return rc::seq::fromContainer(std::move(simpler));
    });
  });
}

// Under RapidCheck: choices and cases are generated values, a failure is RC_FAIL.
class RcChecker : public InProcessChecker {
 public:
  uint64_t below(uint64_t n) override { return RcChooser().below(n); }
  [[noreturn]] void fail(const std::string& message) override { RC_FAIL(message); }
  void classify(bool condition, const std::string& label) override {
    if (condition) RC_TAG(label);
  }

 protected:
  Case<float> draw_f32(const CaseLimits& limits) override { return draw_as_one_value<float>(limits); }
  Case<double> draw_f64(const CaseLimits& limits) override { return draw_as_one_value<double>(limits); }

 private:
  template <class T>
  Case<T> draw_as_one_value(const CaseLimits& limits) {
    return *cases<T>(limits);
  }
};

// A fixed property: its own seeds, run once; a failure ends the test.
class FixedChecker : public InProcessChecker {
 public:
  uint64_t below(uint64_t n) override { return choose_.below(n); }
  [[noreturn]] void fail(const std::string& message) override { throw std::runtime_error(message); }

 protected:
  Case<float> draw_f32(const CaseLimits& limits) override { return draw_case<float>(choose_, limits); }
  Case<double> draw_f64(const CaseLimits& limits) override { return draw_case<double>(choose_, limits); }

 private:
  SeededChooser choose_{1};
};

class PropertyTest : public testing::Test {
 public:
  explicit PropertyTest(const Property& property) : property_(property) {}
  void TestBody() override {
    if (const std::string why =
            not_applicable(property_, kernel_from_environment().claimed(), {}, kernel_from_environment().domain());
        !why.empty())
      GTEST_SKIP() << "not applicable: Property." << property_.name << " " << why << ", which the kernel does not claim";
    if (property_.generated) {
      EXPECT_TRUE(rc::check(std::string("Property.") + property_.name, [this] {
        RcChecker checker;
        property_.check(checker);
      }));
      return;
    }
    try {
      FixedChecker checker;
      property_.check(checker);
    } catch (const std::runtime_error& failure) {
      FAIL() << failure.what();
    }
  }

 private:
  const Property& property_;
};

}  // namespace
}  // namespace attncheck

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (const attncheck::Property& property : attncheck::all_properties())
    testing::RegisterTest("Property", property.name, nullptr, nullptr, __FILE__, __LINE__,
                          [&property]() -> testing::Test* { return new attncheck::PropertyTest(property); });
  // Last, so that every call the properties made is seen: the kernel left the process's
  // floating-point mode as it found it, at loading and in every call (fp_mode.hpp).
  testing::RegisterTest("Kernel", "LeavesTheFloatingPointModeAlone", nullptr, nullptr, __FILE__, __LINE__,
                        []() -> testing::Test* {
                          struct Check : testing::Test {
                            void TestBody() override {
                              EXPECT_EQ(attncheck::kernel_from_environment().fp_mode_finding, "");
                              EXPECT_EQ(attncheck::kernel_from_environment().fp_mode_call_finding, "");
                            }
                          };
                          return new Check;
                        });
  return RUN_ALL_TESTS();
}
