// The Checker adapter: a property run against the kernel in its child process (run_once).
#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "attncheck/abi.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/features.hpp"
#include "attncheck/precision.hpp"
#include "campaign_parts.hpp"

namespace attncheck {
namespace {

struct Failed {
  std::string message;
  int kind = -1;  // the Outcome::Kind of an implementation fault, -1 for a property's own failure
};
// A run that ends with neither verdict: a call the kernel did not take (NTKN: its library cannot
// express the problem), or one the budget's end stopped.
struct NotTaken {
  std::string reason;
};
struct OutOfBudget {};

// One case of either precision, kept for a finding's text.
struct KeptCase {
  std::optional<Case<float>> f32;
  std::optional<Case<double>> f64;
  template <class T>
  void keep(const Case<T>& c) {
    f32.reset();
    f64.reset();
    if constexpr (std::is_same_v<T, float>)
      f32 = c;
    else
      f64 = c;
  }
  explicit operator bool() const { return f32 || f64; }
  std::string text() const { return f32 ? case_to_text(*f32) : f64 ? case_to_text(*f64) : ""; }
};

// A property run by the campaign, its answers from one of three sources: a seed (a fresh run), a
// recorded list of every choice (shrinking, format-1 replay files; 0 once it runs out), or a kept
// finding (its case for the draw, its kept choices for the rest). Every answer and the drawn case
// are kept, so that any run can be written down; the implementation runs in the child process;
// a failure is thrown as Failed.
class CampaignChecker : public Checker {
 public:
  CampaignChecker(IsolatedKernel& kernel, const CampaignOptions& options, uint64_t seed, const std::vector<uint64_t>* recorded,
                  bool ladder, uint32_t capabilities, const Finding* kept = nullptr)
      : kernel_(kernel),
        options_(options),
        fresh_(seed),
        recorded_(recorded),
        ladder_(ladder),
        capabilities_(capabilities),
        kept_(kept) {}

  uint64_t below(uint64_t n) override {
    uint64_t x = 0;
    const std::vector<uint64_t>* answers = kept_ ? &kept_->kept_choices : recorded_;
    const size_t next = kept_ ? kept_choices.size() : choices.size();
    if (!answers)
      x = fresh_.below(n);
    else if (next < answers->size())
      x = std::min((*answers)[next], n == 0 ? 0 : n - 1);
    choices.push_back(x);
    if (!in_draw_) kept_choices.push_back(x);
    return x;
  }
  Results<float> run(const Call<float>& call) override { return run_isolated(call); }
  Results<double> run(const Call<double>& call) override { return run_isolated(call); }
  bool has_lse() const override { return kernel_.capabilities() & ATTNCHECK_CAP_LSE; }
  bool has_f64() const override { return options_.formats & kernel_.capabilities() & ATTNCHECK_CAP_F64; }
  Policies policies() const override { return options_.policies; }
  CaseLimits limits(CaseLimits base) const override {
    base.abi_only = true;
    base.capabilities &= kernel_.capabilities() & capabilities_ & (options_.formats | ~kFormatCapabilities);
    base.domain = kernel_.domain();
    if (ladder_) {  // sizes that straddle tiles, up to FlashAttention's test sizes
      base.ladder_len = 4096;
      base.ladder_width = 256;
    }
    return base;
  }
  [[noreturn]] void fail(const std::string& message) override { throw Failed{message}; }
  // A wrong special value counts as error/bound inf, as the comparator's own summary says it.
  void observe(const Comparison& result) override {
    worst_ratio = std::max(worst_ratio, result.special > 0 ? std::numeric_limits<double>::infinity() : result.worst_ratio);
  }

  std::vector<KernelCall>* calls = nullptr;  // when set, every forward call is kept here
  int64_t calls_made = 0, calls_not_taken = 0;
  Format call_format = Format::f32;    // the last call's
  std::vector<uint64_t> choices;       // every answer of below(), in order
  std::vector<uint64_t> kept_choices;  // those outside the case's draw
  double worst_ratio = 0;
  // The drawn case as exact bits, written only for a finding (a large case's text is megabytes).
  std::string case_text() const { return drawn_.text(); }
  // A property that draws no case: the last case it ran the kernel on (its own), for reports.
  std::string last_call_text() const { return last_.text(); }
  // What the drawn case holds that a policy relaxes (policy_traits); empty when it drew none.
  std::string drawn_traits() const {
    return drawn_.f32 ? policy_traits(*drawn_.f32) : drawn_.f64 ? policy_traits(*drawn_.f64) : "";
  }

 protected:
  Case<float> draw_f32(const CaseLimits& limits) override { return draw_with_policy<float>(limits); }
  Case<double> draw_f64(const CaseLimits& limits) override { return draw_with_policy<double>(limits); }

 private:
  struct Via : Chooser {
    Checker& check;
    explicit Via(Checker& c) : check(c) {}
    uint64_t below(uint64_t n) override { return check.below(n); }
  };
  template <class T>
  Case<T> draw_with_policy(const CaseLimits& limits) {
    Case<T> c;
    if (kept_) {
      std::istringstream text(kept_->case_text);
      std::string first;
      std::getline(text, first);
      if (kept_->case_text.empty())
        throw std::runtime_error("the replay file holds no case, and Property." + kept_->property + " draws one");
      if (!case_text_holds<T>(first))
        throw std::runtime_error("the kept case is not the " + std::string(Precision<T>::name) + " case Property." +
                                 kept_->property + " draws");
      c = case_from_text<T>(first, text);
      if (c.dropout_p != 0)  // a drawn case never has it: the dropout properties add it, with their choices
        throw std::runtime_error("the kept case has a dropout line, which no drawn case has: the dropout properties set it");
    } else {
      Via via(*this);
      in_draw_ = true;
      c = draw_case<T>(via, limits);
      in_draw_ = false;
    }
    follow_policies(c);  // what the implementation says it does with empty rows
    if (options_.policies.masked_inputs == MaskedInputs::finite) c = with_finite_inputs(std::move(c));
    drawn_.keep(c);
    return c;
  }
  template <class T>
  Results<T> run_isolated(const Call<T>& call) {
    // A forward's out [B,H,Tq,dv], lse [B,H,Tq] and keep [B,H,Tq,Tk] when asked; a backward's dq
    // [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv]; a layer's out [B,Tq,D], weights [B,H,Tq,Tk] when asked.
    Results<T> r;
    switch (call.kind) {
      case CallKind::forward:
        forward_isolated(call, r);
        break;
      case CallKind::backward:
        remember(*call.forward);
        settle(kernel_.run_backward(*call.forward, gradients_into(call, r)), call.forward->format, "'s backward", *call.forward);
        break;
      case CallKind::layer:  // its case is the choices that drew it (a layer has no case text yet)
        settle(kernel_.run_layer(*call.layer, r.tensor[slot::LAYER_OUT], r.if_asked(call, slot::WEIGHTS)), call.layer->format,
               "'s layer", *call.layer);
        break;
    }
    return r;
  }
  template <class T>
  void forward_isolated(const Call<T>& call, Results<T>& r) {
    // out [B,H,Tq,dv] written, lse [B,H,Tq] and keep [B,H,Tq,Tk] when the call asks them.
    const Case<T>& c = *call.forward;
    std::vector<T>& out = r.tensor[slot::OUT];
    const std::vector<T>& lse = r.tensor[slot::LSE];  // empty unless asked
    remember(c);
    const Outcome outcome = kernel_.run(c, out, r.if_asked(call, slot::LSE), r.bytes_if_asked(call, slot::KEEP));
    if (calls && outcome.kind != Outcome::not_taken && outcome.kind != Outcome::out_of_budget)
      calls->push_back({case_to_text(c), std::vector<double>(out.begin(), out.end()), std::vector<double>(lse.begin(), lse.end()),
                        outcome.detail});
    settle(outcome, c.format, "", c);
  }

  // Counts the call, and ends the run as its outcome says: a fault as Failed, a call not taken as
  // NotTaken, one the budget's end stopped as OutOfBudget.
  template <class C>
  void settle(const Outcome& outcome, Format format, const char* which, const C& c) {
    ++calls_made;
    call_format = format;
    if (outcome.kind == Outcome::not_taken) {
      ++calls_not_taken;
      throw NotTaken{outcome.detail};
    }
    if (outcome.kind == Outcome::out_of_budget) throw OutOfBudget{};
    if (outcome.kind != Outcome::ok)
      throw Failed{std::string("the implementation") + which + " " + outcome.detail + "\n" + describe(c), outcome.kind};
  }

  // Keeps a copy of the case of each call, when the property drew none (its own cases are small).
  template <class T>
  void remember(const Case<T>& c) {
    if (!drawn_) last_.keep(c);
  }

  IsolatedKernel& kernel_;
  const CampaignOptions& options_;
  SeededChooser fresh_;
  const std::vector<uint64_t>* recorded_;
  bool ladder_;
  uint32_t capabilities_;  // what the recorded choices were drawn with (a format-1 file: ABI v1's)
  const Finding* kept_;
  bool in_draw_ = false;
  KeptCase drawn_, last_;  // the case drawn; a property that draws none: its last call's
};

}  // namespace

// The case's text is written for a failure, or always (`with_text`: a replay says what it ran).
Run run_once(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, uint64_t seed,
             const std::vector<uint64_t>* recorded, bool ladder, uint32_t capabilities, const Finding* kept, bool with_text,
             std::vector<KernelCall>* calls) {
  CampaignChecker checker(kernel, options, seed, recorded, ladder, capabilities, kept);
  checker.calls = calls;
  Run run;
  std::string message;
  kernel.take_stderr();  // an earlier run's
  try {
    property.check(checker);
  } catch (const UnclaimedFeature& unclaimed) {
    throw std::logic_error(harness_error(property.name, unclaimed));
  } catch (const Failed& failure) {
    run.failed = true;
    run.kind = failure.kind;
    message = failure.message;
    // A command's stderr in this run (a Python traceback) goes with its finding.
    if (const std::string err = kernel.take_stderr(); !err.empty())
      message += "\nthe implementation wrote to stderr:\n" + err + (err.back() == '\n' ? "" : "\n");
  } catch (const NotTaken& not_taken) {
    run.not_taken = true;
    run.not_taken_reason = not_taken.reason;
  } catch (const OutOfBudget&) {
    run.out_of_budget = true;
  }
  run.calls = checker.calls_made;
  run.calls_not_taken = checker.calls_not_taken;
  if (run.failed) run.traits = checker.drawn_traits();
  const std::string case_text = run.failed || with_text ? checker.case_text() : "";
  Finding& f = run.finding;  // its failed call is the caller's to find (keep_failed_call)
  f.property = property.name;
  f.message = message;
  f.choices = checker.choices;
  f.kept = true;
  f.case_text = case_text;
  f.kept_choices = checker.kept_choices;
  f.ladder = ladder;
  f.capabilities = capabilities;
  f.last_call_case = run.failed && case_text.empty() ? checker.last_call_text() : "";
  f.ratio = checker.worst_ratio;
  f.format = format_name(checker.call_format);
  run.worst_ratio = checker.worst_ratio;
  return run;
}

}  // namespace attncheck
