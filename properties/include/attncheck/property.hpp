// A property of attention, written once: run by RapidCheck under GoogleTest (properties_test,
// choices that shrink) and by `attncheck check` (seeded choices, the kernel in a child process).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/backward.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/layer_cases.hpp"

namespace attncheck {

// What a property needs from whoever runs it.
class Checker {
 public:
  virtual ~Checker() = default;
  // A choice in [0, n): shrinks toward 0 under RapidCheck, seeded in a campaign.
  virtual uint64_t below(uint64_t n) = 0;
  // Runs the implementation under test: out [B,H,Tq,dv]. Fails the property if it refuses a valid
  // case, crashes, hangs or writes outside its output.
  virtual std::vector<float> run(const Case<float>& c) = 0;
  virtual std::vector<double> run(const Case<double>& c) = 0;
  virtual bool has_f64() const = 0;
  // Whether the implementation returns the log-sum-exp (ABI v2's ATTNCHECK_CAP_LSE), and running it
  // for out and lse [B,H,Tq] when it does.
  virtual bool has_lse() const { return false; }
  virtual std::vector<float> run(const Case<float>& c, std::vector<float>& lse);
  virtual std::vector<double> run(const Case<double>& c, std::vector<double>& lse);
  // out, and lse [B,H,Tq] too when the implementation returns it (else lse is left empty): a
  // property checks the log-sum-exp wherever it checks out (require_agreement's `lse`: lse_if_any).
  template <class T>
  std::vector<T> run_with_lse(const Case<T>& c, std::vector<T>& lse) {
    lse.clear();
    return has_lse() ? run(c, lse) : run(c);
  }
  // Running the implementation on a case with dropout for out and the keep mask it used [B,H,Tq,Tk]
  // (ABI v2's ATTNCHECK_CAP_DROPOUT_MASK: only for a kernel that claims it, claims() says).
  virtual std::vector<float> run(const Case<float>& c, std::vector<uint8_t>& keep);
  // Whether the implementation has a backward (ABI v2's ATTNCHECK_CAP_BACKWARD), and running it on
  // case c: grads' out, lse and dout in, dq, dk and dv written. Fails the property as run does.
  virtual bool has_backward() const { return false; }
  virtual void run_backward(const Case<float>& c, const Grads<float>& grads);
  virtual void run_backward(const Case<double>& c, const Grads<double>& grads);
  // The gradients of case c for dout [B,H,Tq,dv], the backward given reference's out and lse.
  template <class T>
  struct Gradients {
    std::vector<T> dq, dk, dv;  // [B,H,Tq,dk], [B,H_kv,Tk,dk], [B,H_kv,Tk,dv]
  };
  template <class T>
  Gradients<T> gradients(const Case<T>& c, const GradReference<T>& reference, const std::vector<T>& dout);
  // Running the implementation's multi-head layer (ABI v2's ATTNCHECK_CAP_MHA: claims() says) on
  // layer case c: out [B,Tq,D], and each head's weights [B,H,Tq,Tk] into `weights` when given
  // (ATTNCHECK_CAP_MHA_WEIGHTS). Fails the property as run does.
  virtual std::vector<float> run_layer(const LayerCase<float>& c, std::vector<float>* weights = nullptr);
  virtual std::vector<double> run_layer(const LayerCase<double>& c, std::vector<double>* weights = nullptr);
  // What the implementation can take (ABI v1: no bias, empty rows 0), on top of `base`.
  virtual CaseLimits limits(CaseLimits base) const = 0;
  // Whether the implementation takes a feature (ABI v2's capability bits), for cases a property
  // changes itself: an allow mask it adds, key lengths it sets.
  bool claims(uint32_t capability) const { return limits({}).capabilities & capability; }
  // What it takes within its claims (domain.hpp): its restrictions and limits, for cases a property
  // builds or changes itself (a causal mode it sets, a shape it makes).
  Domain domain() const { return limits({}).domain; }
  // The policies the implementation is checked under (policies.hpp), for cases a property builds
  // itself: follow_policies sets a case's empty-row ones.
  virtual Policies policies() const { return {}; }
  template <class T>
  void follow_policies(Case<T>& c) const {
    c.empty_rows = policies().empty_rows;
    c.lse_empty = policies().lse_empty;
  }
  // Ends the property as failed with `message`; never returns.
  [[noreturn]] virtual void fail(const std::string& message) = 0;
  // Counts a feature of the cases in the run's distribution.
  virtual void classify(bool, const std::string&) {}
  // Sees every comparison with the oracle (the campaign keeps the largest error/bound).
  virtual void observe(const Comparison&) {}

  // A case as one value, classified by extreme logits, empty rows and Tq != Tk.
  template <class T>
  Case<T> draw(CaseLimits base = {});
  // Helpers over below(): an integer in [lo, hi), a coin, one of a list.
  int64_t in_range(int64_t lo, int64_t hi) { return lo + int64_t(below(uint64_t(hi - lo))); }
  bool coin() { return below(2) == 1; }
  template <class X>
  X one_of(std::initializer_list<X> xs) {
    return xs.begin()[below(xs.size())];
  }

 protected:
  // The case itself: one generated value, so that RapidCheck shows it with describe().
  virtual Case<float> draw_f32(const CaseLimits& limits) = 0;
  virtual Case<double> draw_f64(const CaseLimits& limits) = 0;
};

// Fails the property with `message` (built only on failure) unless `condition` holds.
#define ATTNCHECK_REQUIRE(check, condition, message) \
  do {                                               \
    if (!(condition)) (check).fail(message);         \
  } while (0)

// Fails unless `out` agrees with the oracle's `reference` for case c: both gates, the rigorous
// bound and the precision gate, with the failure report and the case; and `lse` when given, the
// same way against the oracle's log-sum-exp. A sampled reference (a large case) first gains every
// row the screen flags (rows.hpp). A case with dropout is judged for the keep mask [B,H,Tq,Tk]
// given, the kernel's: `reference` must be the oracle's for it (with_keep).
template <class T>
void require_agreement(Checker& check, const Case<T>& c, const std::vector<T>& out, Reference reference, const std::string& claim,
                       const std::vector<T>* lse = nullptr, const std::vector<uint8_t>* keep = nullptr);

// c's problem with dropout's keep mask [B,H,Tq,Tk] given: what the oracle computes dropout for.
template <class T>
Problem<T> with_keep(const Case<T>& c, const std::vector<uint8_t>& keep) {
  Problem<T> p = c.problem();
  p.dropout_keep = keep.data();
  return p;
}

// The case as a failure report shows it: describe(c), and when its tensors are too large for
// describe to print, the inputs of row (b, h, i), the one that failed (describe_row).
template <class T>
std::string describe_failure(const Case<T>& c, int64_t b, int64_t h, int64_t i);

// Fails unless the gradients agree with the oracle's, tensor by tensor (dq, dk, dv), both gates.
template <class T>
void require_gradients(Checker& check, const Case<T>& c, const Checker::Gradients<T>& computed, const GradReference<T>& reference,
                       const std::vector<T>& dout, const std::string& claim);

// c (without a soft-cap, which bends the scores) with every score of every row shifted by one
// constant near `shift`: a / scale appended to every q and 1 to every k, the appended value rounded
// to c's format and, where the format cannot hold it, taken ten times smaller; `applied` is the
// shift it makes, scale times that value. The scale is c's made explicit, or under the domain's
// default scale only the default of the wider q (1/sqrt(dk + 1)); the width is dk + 1, or the next
// the domain's limits take (zeros between), and under dk = dv the values gain as many zero columns.
// `unshifted` is the same case with 0 appended: its exact outputs are the shifted one's. None when
// the domain takes no wider head.
struct ShiftedCase {
  Case<float> c, unshifted;
  double applied;
};
std::optional<ShiftedCase> with_scores_shifted(const Checker& check, const Case<float>& c, double shift);

// Building cases inside the kernel's domain (domain.hpp), for properties that make their own.
//
// The causal mode a built case gets where every query may see every key it has: none, unless the
// domain takes only causal calls; then lower-right if it takes that (one query then sees every key),
// else upper-left (square: the last query sees every key).
Causal open_causal(const Domain& domain);
// c, whose queries each see all of their keys (one query per (b, h), no causal mask), as a case of
// the domain's: its causal mode open_causal(), and where that or the domain wants Tq = Tk, each
// (b, h)'s query repeated to Tq = Tk rows (its allow and bias rows with it), the last of which, the
// original, sees every key. last_query(c) is the row that holds the original's output.
template <class T>
Case<T> with_last_query(const Checker& check, Case<T> c);
template <class T>
int64_t last_query(const Case<T>& c) {
  return c.shape.Tq - 1;
}
// c's values with zero columns appended up to dv columns (its outputs gain zero columns): for a
// domain of dk = dv, or of head widths, whose value width c does not have.
template <class T>
Case<T> with_value_width(Case<T> c, int64_t dv);

// The weights [B,H,Tq,Tk] the kernel computes for case c, read off its output through values that
// are columns of the identity (out[b,h,i,j - first] = w_ij), with the oracle's exact values and
// bounds: one call with V = I (dv = Tk) where the domain takes that width, else one call per block
// of keys as wide as a value width it takes (dk itself under dk = dv), V holding I's columns of that
// block. `calls` keeps the cases sent, the first first, for reports.
struct ReadWeights {
  std::vector<float> w;            // [B,H,Tq,Tk] (c.shape.scores_at)
  std::vector<long double> exact;  // the oracle's
  std::vector<double> bound;
  std::vector<Case<float>> calls;
};
ReadWeights read_weights(Checker& check, const Case<float>& c);

// The values a property puts where a query may not look (a forbidden key's k and v), in `format`:
// NaN, +-inf and +-1e30, or under --masked-inputs finite the finite extremes alone (+-1e30 and
// +-max/2 of the format; 1e30 is inf in f16, so its largest finite value there), which still catch
// a soft mask value and an overflowing score.
std::vector<float> forbidden_poisons(const Checker& check, Format format);

// Whether the kernel's answers vary between identical calls, for a property that expects two calls
// to keep their bits where it claims (`claimed`, elements of what a call returns; any NaN equals
// any NaN) and found that `changed` (what `changed_call` returned) did not keep `first`'s (what
// `first_call` returned): each call runs again, by turns, up to 30 times. Returns where a repeated
// call differed from its own first answer ("element 3 was 0.5, then 0.50000006"), or nothing: each
// call repeats its answer, and the change made the difference. A kernel choosing at random among
// answers, none likelier than 1/2, repeats them all with probability 2^-30 < 1e-9; one that
// alternates differs at once.
using Call = std::function<std::vector<float>()>;
// Whether `after` keeps `before`'s bits at every element of `claimed` (any NaN equals any NaN).
bool keeps_bits(const std::vector<float>& before, const std::vector<float>& after, const std::vector<size_t>& claimed);
std::optional<std::string> answers_vary(const Call& first_call, const std::vector<float>& first, const Call& changed_call,
                                        const std::vector<float>& changed, const std::vector<size_t>& claimed);

// What run_with_lse returned as lse, for require_agreement: null when there is none.
template <class T>
const std::vector<T>* lse_if_any(const std::vector<T>& lse) {
  return lse.empty() ? nullptr : &lse;
}

// One property: its name (Property.<name> in GoogleTest), its body, and what the file that
// writes it declares about it. Generated properties draw their inputs and run many times; fixed
// ones use fixed seeds and run once.
struct Property {
  const char* name = "";
  void (*check)(Checker&) = nullptr;
  int order = 0;             // the campaign's order: lower first (cheap and high-yield)
  const char* catches = "";  // the planted bug (impl/variants' Mutation) it must catch in ctest
  bool generated = true;
  bool double_precision = false;  // checks f64 (the others f32, f16 and bf16, as the kernel claims them)
  bool float32_cases = false;     // builds float32 cases of its own: runs only on a kernel that claims f32
  bool backward = false;          // checks the backward: the campaign runs it only when the kernel's is checked
  uint32_t needs = 0;             // features it cannot do without (ATTNCHECK_CAP_* bits), every one of them
  uint32_t needs_one_of = 0;      // and, when set, at least one of these
  bool layer = false;             // checks the multi-head layer (needs ATTNCHECK_CAP_MHA); the others a forward
  // Restrictions (ATTNCHECK_ONLY_* bits) whose domain the cases it builds leave: not applicable to a
  // kernel with any of them. The others it keeps (cases drawn inside the domain, changes that stay).
  uint32_t leaves = 0;
  // Builds a case whose heads are wider than the drawn one's (a score shift in an added dimension):
  // not applicable to a kernel that takes one head width.
  bool widens_heads = false;
};

// Why `property` does not apply to a kernel that claims `claimed` (ABI v2's bits; a format or the
// backward left out of a campaign is not claimed) under `policies`, taking `domain`: "needs causal",
// "checks f64", "builds cases outside its domain: causal only"; empty when it applies. A property
// that does not apply is skipped, and said to be (check, properties_test).
std::string not_applicable(const Property& property, uint32_t claimed, const Policies& policies = {}, const Domain& domain = {});
// Its reason for every forward property on a kernel that exports the multi-head layer alone.
inline constexpr const char* kLayerOnlySkip = "checks a forward, and the kernel exports the multi-head layer alone";

// Adds a property to the registry; ATTNCHECK_PROPERTY calls it during static initialization.
bool register_property(const Property& property);

// Writes a property and registers it where it is written: the file is the whole of adding one.
// The fields after the name are Property's, designated, in its order:
//   ATTNCHECK_PROPERTY(RowsSumToOne, .order = 70, .catches = "softmax_over_queries") { ... check ... }
// properties/CMakeLists.txt reads `.catches` from the same line to make the must-fail ctest.
#define ATTNCHECK_PROPERTY(NAME, ...)                                                                   \
  void NAME(Checker& check);                                                                            \
  [[maybe_unused]] static const bool NAME##_registered =                                                \
      ::attncheck::register_property(::attncheck::Property{.name = #NAME, .check = NAME, __VA_ARGS__}); \
  void NAME(Checker& check)

// Every registered property, by order: the order `attncheck check` runs them in.
const std::vector<Property>& all_properties();

}  // namespace attncheck
