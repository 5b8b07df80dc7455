// A property of attention, written once: run by RapidCheck under GoogleTest (properties_test,
// choices that shrink) and by `attncheck check` (seeded choices, the kernel in a child process).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/backward.hpp"
#include "attncheck/call_schema.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/layer_cases.hpp"

namespace attncheck {

// A set of slots (call_schema.hpp): bit s for slot s.
using Slots = uint64_t;
static_assert(slot::kCount <= 64, "a Slots holds one bit per slot");
constexpr Slots slot_bit(slot::Id s) { return Slots(1) << s; }

// One call of the implementation under test, as a property asks it: a forward of a case, the
// backward of one, or the multi-head layer on a layer case, with the optional outputs it asks for.
template <class T>
struct Call {
  CallKind kind = CallKind::forward;
  const Case<T>* forward = nullptr;     // a forward's and a backward's case
  const LayerCase<T>* layer = nullptr;  // a layer call's
  // The backward's given tensors: the forward's out [B,H,Tq,dv] and lse [B,H,Tq], and dout [B,H,Tq,dv].
  const T* out = nullptr;
  const T* lse = nullptr;
  const T* dout = nullptr;
  // The optional outputs asked for (slot::LSE and slot::KEEP of a forward, slot::WEIGHTS of a
  // layer): a kernel writes only what a call asks, and is asked only what it claims.
  Slots asked = 0;
  bool asks(slot::Id s) const { return asked & slot_bit(s); }
};

// What one call wrote, by slot: tensors of the call's format or wide elements (out, lse, dq, dk,
// dv, a layer's out and weights) in `tensor`, byte masks (keep) in `bytes`; empty where it wrote
// nothing. A new output is a new slot, not a new member.
template <class T>
struct Results {
  std::vector<T> tensor[slot::kCount];
  std::vector<uint8_t> bytes[slot::kCount];
  // Slot s's buffer for the kernel to write when `call` asks for it, else null (not written).
  std::vector<T>* if_asked(const Call<T>& call, slot::Id s) { return call.asks(s) ? &tensor[s] : nullptr; }
  std::vector<uint8_t>* bytes_if_asked(const Call<T>& call, slot::Id s) { return call.asks(s) ? &bytes[s] : nullptr; }
};

// A backward call's gradients in `results`, dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk] and dv [B,H_kv,Tk,dv],
// made NaN (an unwritten gradient fails), and the Grads that hand them to the kernel with the
// call's out, lse and dout.
template <class T>
Grads<T> gradients_into(const Call<T>& call, Results<T>& results);

// What a property needs from whoever runs it.
class Checker {
 public:
  virtual ~Checker() = default;
  // A choice in [0, n): shrinks toward 0 under RapidCheck, seeded in a campaign.
  virtual uint64_t below(uint64_t n) = 0;
  // Runs the implementation under test on `call`: every output the kernel writes (a forward's out,
  // a backward's dq, dk and dv, a layer's out) and those the call asks. Fails the property if it
  // refuses a valid call, crashes, hangs or writes outside its outputs. The helpers below are the
  // calls properties make.
  virtual Results<float> run(const Call<float>& call) = 0;
  virtual Results<double> run(const Call<double>& call) = 0;
  virtual bool has_f64() const = 0;
  // Running case c for out [B,H,Tq,dv].
  template <class T>
  std::vector<T> run(const Case<T>& c) {
    return std::move(forward(c, 0).tensor[slot::OUT]);
  }
  // Whether the implementation returns the log-sum-exp (ABI v2's ATTNCHECK_CAP_LSE), and running
  // case c for out [B,H,Tq,dv] and lse [B,H,Tq] when it does. Not claims(ATTNCHECK_CAP_LSE): the
  // campaign narrows its claims to what a replayed file's choices were drawn with (ABI v1's for
  // format 1), yet the kernel still returns the log-sum-exp and the replay checks it
  // (corpus/regressions/check/format1/mutant_sentinel_1e4.replay's finding is in it).
  virtual bool has_lse() const { return false; }
  template <class T>
  std::vector<T> run(const Case<T>& c, std::vector<T>& lse) {
    Results<T> results = forward(c, slot_bit(slot::LSE));
    lse = std::move(results.tensor[slot::LSE]);
    return std::move(results.tensor[slot::OUT]);
  }
  // out, and lse [B,H,Tq] too when the implementation returns it (else lse is left empty): a
  // property checks the log-sum-exp wherever it checks out (require_agreement's `lse`: lse_if_any).
  template <class T>
  std::vector<T> run_with_lse(const Case<T>& c, std::vector<T>& lse) {
    lse.clear();
    return has_lse() ? run(c, lse) : run(c);
  }
  // Running the implementation on a case with dropout for out [B,H,Tq,dv] and the keep mask it used
  // [B,H,Tq,Tk] (ABI v2's ATTNCHECK_CAP_DROPOUT_MASK: only for a kernel that claims it, claims() says).
  template <class T>
  std::vector<T> run(const Case<T>& c, std::vector<uint8_t>& keep) {
    Results<T> results = forward(c, slot_bit(slot::KEEP));
    keep = std::move(results.bytes[slot::KEEP]);
    return std::move(results.tensor[slot::OUT]);
  }
  // The gradients of case c for dout [B,H,Tq,dv], the implementation's backward (ABI v2's
  // ATTNCHECK_CAP_BACKWARD) given reference's out [B,H,Tq,dv] and lse [B,H,Tq].
  template <class T>
  struct Gradients {
    std::vector<T> dq, dk, dv;  // [B,H,Tq,dk], [B,H_kv,Tk,dk], [B,H_kv,Tk,dv]
  };
  template <class T>
  Gradients<T> gradients(const Case<T>& c, const GradReference<T>& reference, const std::vector<T>& dout) {
    Results<T> results = run(Call<T>{.kind = CallKind::backward,
                                     .forward = &c,
                                     .out = reference.out.data(),
                                     .lse = reference.lse.data(),
                                     .dout = dout.data()});
    return {std::move(results.tensor[slot::DQ]), std::move(results.tensor[slot::DK]), std::move(results.tensor[slot::DV])};
  }
  // Running the implementation's multi-head layer (ABI v2's ATTNCHECK_CAP_MHA: claims() says) on
  // layer case c: out [B,Tq,D], and each head's weights [B,H,Tq,Tk] into `weights` when given
  // (ATTNCHECK_CAP_MHA_WEIGHTS).
  template <class T>
  std::vector<T> run_layer(const LayerCase<T>& c, std::vector<T>* weights = nullptr) {
    Results<T> results = run(Call<T>{.kind = CallKind::layer, .layer = &c, .asked = weights ? slot_bit(slot::WEIGHTS) : 0});
    if (weights) *weights = std::move(results.tensor[slot::WEIGHTS]);
    return std::move(results.tensor[slot::LAYER_OUT]);
  }
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
  // For an implementation that runs a plain forward alone: fails the property on any other call
  // (a backward, a layer, an optional output asked) with what the implementation lacks.
  template <class T>
  [[noreturn]] void lacks(const Call<T>& call);

 private:
  // Case c's forward, asking for the optional outputs `asked`.
  template <class T>
  Results<T> forward(const Case<T>& c, Slots asked) {
    return run(Call<T>{.kind = CallKind::forward, .forward = &c, .asked = asked});
  }
};

// Fails the property with `message` (built only on failure) unless `condition` holds.
#define ATTNCHECK_REQUIRE(check, condition, message) \
  do {                                               \
    if (!(condition)) (check).fail(message);         \
  } while (0)

// Fails unless `out` agrees with the oracle's `reference` for case c (a paged or varlen c judged as its dense twin): both gates,
// the rigorous bound and the precision gate, with the failure report and the case; and `lse` when given, the same way against the
// oracle's log-sum-exp. A sampled reference (a large case) first gains every row the screen flags (rows.hpp). A case with dropout
// is judged for the keep mask [B,H,Tq,Tk] given, the kernel's: `reference` must be the oracle's for it (with_keep).
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
using Rerun = std::function<std::vector<float>()>;
// Whether `after` keeps `before`'s bits at every element of `claimed` (any NaN equals any NaN).
bool keeps_bits(const std::vector<float>& before, const std::vector<float>& after, const std::vector<size_t>& claimed);
std::optional<std::string> answers_vary(const Rerun& first_call, const std::vector<float>& first, const Rerun& changed_call,
                                        const std::vector<float>& changed, const std::vector<size_t>& claimed);

// Fails unless two calls of the kernel that must agree do, row by row: dv outputs of `a` from a_at and
// of `b` from b_at, each pair equal (infinities alike), both NaN, or apart by at most the sum of the
// oracle's bounds of the two calls (ref_a's, ref_b's). `what(col, x, y, allowed)` says what moved.
template <class What>
void require_rows_agree(Checker& check, const std::vector<float>& a, const Reference& ref_a, size_t a_at,
                        const std::vector<float>& b, const Reference& ref_b, size_t b_at, int64_t dv, What&& what) {
  for (int64_t col = 0; col < dv; ++col) {
    const double x = a[a_at + size_t(col)], y = b[b_at + size_t(col)];
    const double allowed = ref_a.out.bound[a_at + size_t(col)] + ref_b.out.bound[b_at + size_t(col)];
    ATTNCHECK_REQUIRE(check, x == y || (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= allowed, what(col, x, y, allowed));
  }
}

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
