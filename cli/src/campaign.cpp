#include "attncheck/campaign.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <type_traits>
#include <sstream>
#include <stdexcept>

#include "attncheck/abi.hpp"
#include "attncheck/case_shrink.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/causes.hpp"
#include "attncheck/diagnosis.hpp"
#include "attncheck/features.hpp"
#include "attncheck/isolated_kernel.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/plugin_loader.hpp"
#include "attncheck/precision.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/property.hpp"
#include "attncheck/replay_file.hpp"

namespace attncheck {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

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

// One run of `property`: the failure, if any, with the choices that led to it; or, neither passed
// nor failed, a call not taken (its reason) or the budget's end.
struct Run {
  bool failed = false;
  int kind = -1;  // as Failed::kind
  Finding finding;
  double worst_ratio = 0;
  bool not_taken = false, out_of_budget = false;
  std::string not_taken_reason;
  std::string traits;  // of the drawn case, when it failed (policy_traits)
  int64_t calls = 0, calls_not_taken = 0;
  bool judged() const { return !not_taken && !out_of_budget; }
};
// The case's text is written for a failure, or always (`with_text`: a replay says what it ran).
Run run_once(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, uint64_t seed,
             const std::vector<uint64_t>* recorded, bool ladder, uint32_t capabilities = ~0u, const Finding* kept = nullptr,
             bool with_text = false, std::vector<KernelCall>* calls = nullptr) {
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

// What broke, in words: an implementation fault's kind; else what the failed call shows (a poisoned
// input no query may see changed it, a wrong special value, a wrong value); else how the property
// failed (error/bound inf: a wrong special value; beyond the bound: a wrong value; the precision
// gate: imprecise; else a relation between calls or an identity).
std::string finding_kind(int kind, double ratio, const std::string& message, const Diagnosis& d = {}) {
  switch (kind) {
    case Outcome::refused:
      return "refused";
    case Outcome::crashed:
      return "crashed";
    case Outcome::hung:
      return "hung";
    case Outcome::exited:
      return "exited";
    case Outcome::stray_write:
      return "wrote outside its output";
    case Outcome::raised:
      return "raised";
    case Outcome::broke_protocol:
      return "broke the protocol";
    default:
      break;
  }
  if (d.varies || message.rfind("answers vary between identical calls", 0) == 0) return "answers vary";
  if (d.wrong && d.poisoned) return d.extreme ? "changed by a poisoned forbidden input" : "changed by a forbidden input";
  if (d.wrong) return d.element.special() ? "wrong special value" : "wrong value";
  if (!(ratio < std::numeric_limits<double>::infinity())) return "wrong special value";
  if (ratio >= 1) return "wrong value";
  return message.find("imprecise: ") != std::string::npos ? "imprecise" : "broke a relation";
}

// Whether a finding's kind is a fault of the call (it refused, crashed, hung, raised...), not a wrong result.
bool fault_kind(const std::string& kind) {
  for (int k = Outcome::refused; k <= Outcome::broke_protocol; ++k)
    if (kind == finding_kind(k, 0, "")) return true;
  return false;
}

// What a raised finding raised, "NotExpressible" or "TypeError" (the word after "raised " in its
// message); empty for other kinds. An adapter's limit and a library's exception are two findings.
std::string raised_type(const std::string& kind, const std::string& message) {
  const size_t at = kind == "raised" ? message.find("raised ") : std::string::npos;
  if (at == std::string::npos) return "";
  const size_t start = at + 7, end = message.find_first_of(": \n", start);
  return message.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// A trial that fails as the counterexample did: the same kind of failure (a property's, or the
// same kind of fault, a raise of the same exception type), and clearly: a largest error/bound of at least 2 (or the found case's,
// if smaller), or a failure of another kind than the bound (a wrong special value, a broken identity: every error/bound under 1),
// so that shrinking never trades a bug shown plainly for a case that barely fails.
bool fails_alike(const Run& run, int kind, double found_ratio, const std::string& raised) {
  return run.failed && run.kind == kind && (run.worst_ratio >= std::min(found_ratio, 2.0) || run.worst_ratio < 1) &&
         raised_type(finding_kind(run.kind, 0, ""), run.finding.message) == raised;
}

// Makes a counterexample smaller within options.shrink_seconds (a trial under way finishes). A
// drawn case is shrunk as a case (case_shrink.hpp: whole batches, heads, queries, keys and
// columns removed, masks and options cleared, values made plain), each simpler neighbour kept when
// it fails alike; a property that draws no case has its choices shrunk instead. A hang is not
// shrunk: every trial would cost the whole case timeout.
Finding shrink(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding best, int kind,
               double found_ratio, double seconds) {
  if (kind == Outcome::hung) return best;
  const std::string raised = raised_type(finding_kind(kind, 0, ""), best.message);  // an adapter's limit is not a library's raise
  const Clock::time_point start = Clock::now();
  auto in_time = [&] { return !protocol::stop_requested() && since(start) < seconds; };
  struct OutOfTime {};  // ends offer_simpler's walk, whose every neighbour of a large case is a copy of it
  if (!best.case_text.empty()) {
    visit_case_text(best.case_text, [&](auto c) {
      using T = typename decltype(c.q)::value_type;
      while (in_time()) {
        std::optional<Case<T>> simpler;
        auto fails_too = [&](Case<T>&& candidate) {
          if (!in_time()) throw OutOfTime{};
          Finding trial = best;
          trial.case_text = case_to_text(candidate);
          const Run run = run_once(kernel, options, property, 0, nullptr, false, ~0u, &trial);
          if (!fails_alike(run, kind, found_ratio, raised)) return false;
          best = run.finding;
          simpler = std::move(candidate);
          return true;
        };
        bool found = false;
        try {
          found = offer_simpler<T>(c, kernel.capabilities(), fails_too, kernel.domain());
        } catch (const OutOfTime&) {
          break;
        }
        if (!found) break;
        c = std::move(*simpler);
      }
      return 0;
    });
    return best;
  }
  for (bool improved = true; improved && in_time();) {
    improved = false;
    for (size_t at = 0; at < best.choices.size() && in_time(); ++at) {
      const uint64_t now = best.choices[at];
      // A small choice (a kind, a count) tries every smaller value from 0 up, so that it shrinks to
      // the smallest that still fails, not to the first neighbour that passes; a large one (a
      // value, a seed) tries 0, half and one less.
      std::vector<uint64_t> tries;
      if (now <= 64)
        for (uint64_t smaller = 0; smaller < now; ++smaller) tries.push_back(smaller);
      else
        tries = {0, now / 2, now - 1};
      for (uint64_t smaller : tries) {
        if (!in_time()) break;
        std::vector<uint64_t> trial = best.choices;
        trial[at] = smaller;
        const Run run = run_once(kernel, options, property, 0, &trial, best.ladder, best.capabilities);
        if (!fails_alike(run, kind, found_ratio, raised)) continue;
        best = run.finding;
        improved = true;
        break;
      }
    }
  }
  return best;
}

// The case of the kernel call `finding` is about (Finding::failed_call): its run once more, every
// call kept.
void keep_failed_call(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding& finding) {
  std::vector<KernelCall> calls;
  run_once(kernel, options, property, 0, nullptr, false, ~0u, &finding, false, &calls);
  if (calls.empty()) return;
  const WrongCall wrong = first_wrong_call(calls);
  const KernelCall& call = calls[std::min(wrong.index, calls.size() - 1)];
  finding.failed_call = call.case_text;
  finding.failed_call_why = wrong.index < calls.size() ? wrong.why : "";  // a relation between calls broke: no call is wrong
  finding.failed_call_lse = !call.lse.empty();
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: distinct seeds per (campaign seed, property, round)
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

const Property& property_named(const std::string& name) {
  for (const Property& p : all_properties())
    if (name == p.name) return p;
  throw std::runtime_error("no property named '" + printable(name, 80) + "'");
}

// Its failed call kept (keep_failed_call), what it shows (diagnose) and the known bug class it
// matches (cause_of), and its kind from them.
void examine(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding& f, int fault,
             CauseCache& causes) {
  if (fault != Outcome::hung) keep_failed_call(kernel, options, property, f);
  diagnose(kernel, options, f);
  if (f.diagnosis.wrong) f.ratio = std::max(f.ratio, f.diagnosis.element.ratio);  // a relation's failed call: how wrong it is
  f.kind = finding_kind(fault, f.ratio, f.message, f.diagnosis);
  f.diagnosis.cause = cause_of(kernel, f, causes);
}

}  // namespace

// Whether `found` is an earlier finding again. Findings in two formats, of two exception types a
// raise named, or one a policy accepts and one none does (a convention, and a bug beside it), are
// never one. Within that: the same property failing the same way; a hang again (whose call is not
// run twice); a failed call that fails as an earlier finding's does and needs the same features or
// shares one it needs (Diagnosis::same_bug: one bug seen through many properties); one fault of the
// layer through each layer property (whose calls have no case text to diagnose). Never a shared cause
// alone: a probe's sentence says what the kernel does, not which finding it explains. A heuristic
// (docs/checking.md): a second bug whose calls fail exactly as the first's is said once the first
// is fixed.
bool seen_before(const Finding& found, const std::vector<Finding>& earlier) {
  const auto layer = [](const Finding& f) { return f.property.rfind("Layer", 0) == 0; };
  for (const Finding& f : earlier) {
    if (f.format != found.format || raised_type(f.kind, f.message) != raised_type(found.kind, found.message) ||
        (f.diagnosis.accepting != 0) != (found.diagnosis.accepting != 0))
      continue;
    if ((f.kind == found.kind && (f.property == found.property || f.hung)) || found.diagnosis.same_bug(f.diagnosis) ||
        (f.kind == found.kind && fault_kind(f.kind) && layer(f) && layer(found)))
      return true;
  }
  return false;
}

uint32_t checked_capabilities(uint32_t claimed, const CampaignOptions& options) {
  uint32_t checked = claimed & (all_capabilities() | kLayerOnly) & (options.formats | ~kFormatCapabilities) &
                     (options.backward ? ~0u : ~uint32_t(ATTNCHECK_CAP_BACKWARD));
  for (const Feature& f : features())  // a feature whose base is not claimed: no call can use it
    if (f.needs && !(claimed & f.needs)) checked &= ~f.capability;
  return checked;
}

Coverage coverage(uint32_t claimed, const CampaignOptions& options) {
  const uint32_t all = all_capabilities(), exercised = checked_capabilities(claimed, options);
  return {exercised & all, claimed & all & ~exercised, ~claimed & all};
}

std::string shrunk_shape(const Finding& f) {
  const size_t at = f.case_text.find("\nshape ");
  if (at == std::string::npos) return f.hung ? "not shrunk: it hung" : "its own fixed case";
  return f.case_text.substr(at + 7, f.case_text.find('\n', at + 1) - at - 7) + (f.hung ? " (not shrunk: it hung)" : "");
}

namespace {

// What the kernel claims, and what of it the campaign checks: the properties that do not apply are
// set aside; a campaign that could check nothing is an error.
CampaignResult claims(const IsolatedKernel& kernel, const CampaignOptions& options) {
  CampaignResult result;
  result.abi_version = kernel.version();
  result.capabilities = kernel.capabilities();
  result.domain = kernel.domain();
  const uint32_t checked = checked_capabilities(kernel.capabilities(), options);
  for (const Property& property : all_properties())
    if (std::string why = not_applicable(property, checked, options.policies, kernel.domain()); !why.empty())
      result.not_applicable[property.name] = why;
  if (options.require_backward && !(kernel.capabilities() & ATTNCHECK_CAP_BACKWARD))
    throw std::runtime_error(options.impl + ": claims no backward (ATTNCHECK_CAP_BACKWARD), and --backward on asks for it");
  if (!(checked & kFormatCapabilities))
    throw std::runtime_error(options.impl + ": claims none of the formats asked for (" +
                             feature_names(options.formats & kFormatCapabilities) + "), so nothing to check");
  return result;
}

// What tells failed runs apart before any call is run again: the property, what broke, the
// format, the exception type a raise named, and what the drawn case holds that a policy relaxes
// (policy_traits: an empty row, a NaN or inf where no query looks).
std::string run_key(const Run& run) {
  const Finding& f = run.finding;
  const std::string kind = finding_kind(run.kind, run.worst_ratio, f.message);
  return f.property + "|" + kind + "|" + f.format + "|" + raised_type(kind, f.message) + "|" + run.traits;
}

// The time a run may still spend, of its budget: the search stops at options.seconds, and what a
// finding costs after it (shrinking, examining) may take it to kOvertime of it, never further.
constexpr double kOvertime = 1.08;

// A failed run becomes a finding: shrunk (in --shrink-seconds, or what is left of the run's budget),
// its failed call kept and examined. With keep_going, one an earlier finding explains (seen_before,
// before shrinking and after) is dropped; a run whose key (run_key) an earlier run had is examined
// again only the 2nd, 4th, 8th... time, and not once examining has taken a third of the budget, so
// that a bug in every call costs little.
void add_finding(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, const Run& run,
                 int64_t position, CampaignResult& result, std::map<std::string, int64_t>& repeats, CauseCache& causes,
                 Clock::time_point began) {
  const Clock::time_point start = Clock::now();
  Finding finding = run.finding;
  finding.run_kind = finding_kind(run.kind, run.worst_ratio, run.finding.message);
  auto examined = [&] {
    examine(kernel, options, property, finding, run.kind, causes);
    result.examine_seconds += since(start);
  };
  if (options.keep_going) {
    // Once examining has had a third of the budget, a key seen before is examined no more.
    const int64_t seen = ++repeats[run_key(run)];
    if (seen > 1 && ((seen & (seen - 1)) != 0 || result.examine_seconds > options.seconds / 3)) return;
    examined();
    if (seen_before(finding, result.findings)) return;
  }
  const Clock::time_point shrinking = Clock::now();
  const double left = options.seconds * kOvertime - since(began);
  finding = shrink(kernel, options, property, run.finding, run.kind, run.worst_ratio,
                   std::max(0.0, std::min(options.shrink_seconds, left)));
  result.shrink_seconds += since(shrinking);
  finding.run_kind = finding_kind(run.kind, run.worst_ratio, run.finding.message);
  finding.hung = run.kind == Outcome::hung;
  finding.found_at = position;
  const Clock::time_point again = Clock::now();
  examine(kernel, options, property, finding, run.kind, causes);  // the shrunk run's, which may show it plainer
  result.examine_seconds += since(again);
  if (options.keep_going && seen_before(finding, result.findings)) return;
  result.found = true;
  result.findings.push_back(std::move(finding));
  result.finding = result.findings.front();
}

// A run that ended with neither verdict, counted: a call not taken (and its reason), or the budget's end.
void count_unjudged(const Property& property, const Run& run, CampaignResult& result) {
  if (run.out_of_budget) {
    ++result.cut_runs;
    return;
  }
  ++result.not_taken_runs[property.name];
  ++result.not_taken_reasons[run.not_taken_reason.substr(0, run.not_taken_reason.find(": "))];  // its first clause
}

}  // namespace

CampaignResult run_campaign_share(const CampaignOptions& options, const CampaignShare& share) {
  // The budget bounds the whole run: starting the kernel, the search, and each finding's shrinking
  // and examining; no call runs past kOvertime of it (a call the end stops gives no verdict).
  const Clock::time_point began = Clock::now();
  IsolatedKernel kernel(options.impl, options.case_timeout, options.command);
  kernel.adapt_timeout(options.adaptive_timeout);
  kernel.set_budget_end(protocol::deadline_after(options.seconds * kOvertime));
  kernel.start();
  CampaignResult result = claims(kernel, options);
  result.start_seconds = since(began);
  const std::vector<Property>& properties = all_properties();
  // The runs are one sequence, fixed by the seed and the kernel's claims, each run's seed by its
  // property and round; this share runs its places in it (worker, worker + jobs, ...). The budget
  // decides only where it stops: at place options.max_cases (so that the union of the shares is
  // the same for any number of them), or at the first run that would start once the time is spent,
  // or whose property has taken longer than what is left (later, cheaper runs do not fill the gap,
  // so a longer budget always checks a superset and the count moves only with the speed), or past
  // another share's first finding.
  std::vector<double> longest(properties.size(), 0);
  std::map<std::string, int64_t> repeats;  // failed runs by run_key
  CauseCache causes;
  int64_t position = 0, running = 0;  // running: the place of the run under way
  // A run past another share's first finding is moot: its call is stopped, not waited for.
  if (share.first_finding) kernel.stop_when([&] { return share.first_finding->load() < running; });
  bool started = true, stop = false;
  auto finish = [&] {
    result.seconds = since(began) - result.start_seconds - result.shrink_seconds - result.examine_seconds;
    result.fp_mode = kernel.fp_mode_finding();
    return result;
  };
  // Every property runs in round 0 (the fixed ones only then, last by their order), so that a short
  // budget checks each once; a round after it that starts nothing means no later one will.
  for (uint64_t round = 0; !stop && (started || round <= 1); ++round) {
    started = false;
    for (size_t index = 0; index < properties.size() && !stop; ++index) {
      const Property& property = properties[index];
      if (!property.generated && round > 0) continue;
      if (result.not_applicable.count(property.name)) continue;
      const int64_t at = position++;
      stop = protocol::stop_requested() || (options.max_cases > 0 && at >= options.max_cases) ||
             since(began) >= options.seconds || longest[index] > options.seconds - since(began) ||
             (share.first_finding && at > share.first_finding->load());
      if (stop) break;
      started = true;
      if (at % share.jobs != share.worker) continue;
      running = at;
      const Clock::time_point run_start = Clock::now();
      // Round 0 draws small cases only; from round 1 on, the size ladder joins.
      const Run run = run_once(kernel, options, property, mix(options.seed ^ mix(index) ^ mix(round << 32)), nullptr, round > 0);
      const double took = since(run_start);
      longest[index] = std::max(longest[index], took);
      result.calls += run.calls;
      result.not_taken += run.calls_not_taken;
      if (!run.judged()) {
        count_unjudged(property, run, result);
        continue;
      }
      ++result.cases;
      ++result.per_property[property.name];
      result.per_property_seconds[property.name] += took;
      result.worst_ratio = std::max(result.worst_ratio, run.worst_ratio);
      if (options.progress) options.progress({result.cases, result.per_property.size(), since(began), run.failed});
      if (!run.failed) continue;
      if (!options.keep_going && share.first_finding)  // the other shares stop past it
        for (int64_t first = share.first_finding->load(); at < first && !share.first_finding->compare_exchange_weak(first, at);) {
        }
      add_finding(kernel, options, property, run, at, result, repeats, causes, began);
      if (result.found && !options.keep_going) return finish();
    }
  }
  return finish();
}

CampaignResult replay(const CampaignOptions& options, const Finding& recorded, std::vector<KernelCall>* calls) {
  IsolatedKernel kernel(options.impl, options.case_timeout, options.command);
  kernel.adapt_timeout(options.adaptive_timeout);
  kernel.start();
  if (property_named(recorded.property).double_precision && !kernel.has_f64())
    throw std::runtime_error(options.impl + ": no attncheck_forward_f64, so Property." + recorded.property +
                             " cannot be replayed on it");
  CampaignOptions both = options;  // the recorded case decides the format, not --dtype
  both.formats = ~0u;
  const Clock::time_point start = Clock::now();
  const Property& property = property_named(recorded.property);
  // The recorded case runs up to kReplayRuns times while it passes: a kernel whose answers vary
  // between identical calls may pass once; each run's calls are kept to show that they vary.
  constexpr int kReplayRuns = 3;
  std::vector<std::vector<KernelCall>> runs;
  Run run;
  for (int n = 0; n < kReplayRuns && !run.failed; ++n) {
    runs.emplace_back();
    run = recorded.kept ? run_once(kernel, both, property, 0, nullptr, false, ~0u, &recorded, true, &runs.back())
                        : run_once(kernel, both, property, 0, &recorded.choices, recorded.ladder, recorded.capabilities, nullptr,
                                   true, &runs.back());
  }
  if (calls) *calls = runs.back();
  CampaignResult result;
  result.abi_version = kernel.version();
  result.capabilities = kernel.capabilities();
  result.domain = kernel.domain();
  result.replayed = true;
  result.cases = int64_t(runs.size());
  result.calls = run.calls;
  result.not_taken = run.calls_not_taken;
  result.per_property[recorded.property] = result.cases;
  result.found = run.failed;
  result.finding = run.finding;
  const std::string varies = answers_vary(runs);
  if (run.failed) {
    CauseCache causes;
    examine(kernel, both, property, result.finding, run.kind, causes);
    if (runs.size() > 1) {  // it passed before it failed
      result.finding.kind = "answers vary";
      result.finding.message = varies + "; the recorded case passed " + std::to_string(runs.size() - 1) + " of " +
                               std::to_string(runs.size()) + " runs\n" + result.finding.message;
    }
  } else if (!varies.empty()) {  // it passes every run, but identical calls answered differently: not "no longer fails"
    result.found = true;
    result.finding = recorded;
    result.finding.kind = "answers vary";
    result.finding.message = varies + " over " + std::to_string(runs.size()) + " runs of the recorded case";
  }
  if (result.found) result.findings = {result.finding};
  result.worst_ratio = run.worst_ratio;
  result.seconds = since(start);
  result.fp_mode = kernel.fp_mode_finding();
  return result;
}

std::string answers_vary(const std::vector<std::vector<KernelCall>>& runs) {
  double largest = 0;
  std::string where;
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t n = 0; n < std::min(runs[0].size(), runs[r].size()); ++n) {
      const KernelCall &first = runs[0][n], &again = runs[r][n];
      if (first.case_text != again.case_text || first.out.size() != again.out.size()) continue;
      for (size_t e = 0; e < first.out.size(); ++e) {
        if (unchanged(first.out[e], again.out[e])) continue;
        const double difference =
            std::isnan(first.out[e]) || std::isnan(again.out[e]) ? INFINITY : std::fabs(first.out[e] - again.out[e]);
        if (!where.empty() && !(difference > largest)) continue;
        largest = difference;
        where = "call " + std::to_string(n + 1) + "'s out element " + std::to_string(e) + " was " + show(first.out[e]) +
                ", then " + show(again.out[e]);
      }
    }
  return where.empty() ? ""
                       : "answers vary between identical calls: " + where + " (the largest difference, " + show(largest) + ")";
}

WrongCall first_wrong_call(const std::vector<KernelCall>& calls) {
  for (size_t n = 0; n < calls.size(); ++n) {
    const KernelCall& call = calls[n];
    if (!call.fault.empty()) return {n, "the kernel " + call.fault};
    const Comparison result = visit_case_text(call.case_text, [&](const auto& c) {
      using T = typename std::decay_t<decltype(c.q)>::value_type;
      return judged(c, std::vector<T>(call.out.begin(), call.out.end()), std::vector<T>(call.lse.begin(), call.lse.end()));
    });
    if (result.ok()) continue;
    const Mismatch& m = result.special ? result.first_special : result.worst;
    return {n, m.where() + (result.special ? ": " + m.expected_got() : " outside the bound (error/bound " + show(m.ratio) + ")")};
  }
  return {calls.size(), ""};
}

void write_replay(const std::string& path, const CampaignOptions& options, const Finding& finding, const Domain& domain) {
  ReplayFile r;
  r.domain = domain;
  r.property = finding.property;
  r.impl = options.impl;
  r.command = options.command;
  r.policies = options.policies;
  r.case_text = finding.case_text;
  r.choices = finding.kept_choices;
  r.failed_call = finding.failed_call;
  r.failed_call_why = finding.failed_call_why;
  r.failed_call_lse = finding.failed_call_lse;
  write_replay_file(path, r);
}

Finding read_replay(const std::string& path, CampaignOptions& options, bool keep_impl) {
  const ReplayFile r = read_replay_file(path);
  property_named(r.property);  // a clear error for an unknown property
  if (!keep_impl) options.impl = r.impl, options.command = r.command;
  options.policies = r.policies;
  Finding finding;
  finding.property = r.property;
  finding.kept = r.format == 2;  // 1: the generator's choices; 2: the case itself
  // Format 1 predates ABI v2: its choices were drawn with what v1 carries.
  if (!finding.kept) finding.capabilities = kAbiV1Capabilities | ATTNCHECK_CAP_F64;
  finding.case_text = r.case_text;
  (finding.kept ? finding.kept_choices : finding.choices) = r.choices;
  finding.failed_call = r.failed_call;
  finding.failed_call_why = r.failed_call_why;
  finding.failed_call_lse = r.failed_call_lse;
  return finding;
}

}  // namespace attncheck
