#include "attncheck/layer_support.hpp"

#include <cmath>

namespace attncheck {

namespace {
// The checker's choices as a Chooser, so that the layer's draw shrinks and replays as a case's does.
struct Via : Chooser {
  Checker& check;
  explicit Via(Checker& c) : check(c) {}
  uint64_t below(uint64_t n) override { return check.below(n); }
};

std::string index_text(const std::vector<int64_t>& dims, int64_t at) {
  std::string text;
  for (size_t d = dims.size(); d-- > 0;) {
    text = std::to_string(at % dims[d]) + (text.empty() ? "" : "," + text);
    at /= dims[d];
  }
  return "[" + text + "]";
}
}  // namespace

template <class T>
LayerCase<T> draw_layer(Checker& check, CaseLimits base) {
  Via via(check);
  LayerCase<T> c = draw_layer_case<T>(via, check.limits(base));
  c.empty_rows = check.policies().empty_rows;
  check.classify(true, c.mix);
  return c;
}

template <class T>
void require_layer_agreement(Checker& check, const LayerCase<T>& c, const std::vector<T>& out,
                             std::type_identity_t<const std::vector<T>*> weights, const LayerReference& reference,
                             const std::string& claim) {
  const Comparison result = compare(out.data(), reference.out);
  check.observe(result);
  const char* label = Arithmetic::of(c.format).label;
  ATTNCHECK_REQUIRE(check, result.ok(), claim + ": wrong: " + result.report(label) + "\n" + describe(c));
  if (!weights) return;
  const Comparison w = compare(weights->data(), reference.weights);
  check.observe(w);
  ATTNCHECK_REQUIRE(check, w.ok(), claim + ": wrong weights: " + w.report(label) + "\n" + describe(c));
  const Shape& s = c.shape.heads;
  for (int64_t row = 0; row < s.B * s.H * s.Tq; ++row) {
    double sum = 0, exact = 0, bounds = 0;
    for (int64_t j = 0; j < s.Tk; ++j) {
      sum += double((*weights)[size_t(row * s.Tk + j)]);
      exact += double(reference.weights.exact[size_t(row * s.Tk + j)]);
      bounds += reference.weights.bound[size_t(row * s.Tk + j)];
    }
    if (!std::isfinite(exact) || exact == 0) continue;  // a NaN row, or one with no permitted key
    ATTNCHECK_REQUIRE(check, std::fabs(sum - 1) <= bounds + double(s.Tk) * 0x1p-52,
                      claim + ": the weights of row " + index_text({s.B, s.H, s.Tq}, row) + " sum to " + show(sum) +
                          " over the keys, not 1 (within " + show(bounds) + ")\n" + describe(c));
  }
}

template <class T>
void require_close(Checker& check, const LayerCase<T>& c, const std::vector<T>& before, const std::vector<T>& after,
                   const ExactTensor& before_ref, const ExactTensor& after_ref, const std::string& claim) {
  for (size_t at = 0; at < before.size(); ++at) {
    const double allowed = before_ref.bound[at] + after_ref.bound[at];
    if (!std::isfinite(allowed)) continue;
    const bool both_nan = std::isnan(before[at]) && std::isnan(after[at]);
    ATTNCHECK_REQUIRE(check, both_nan || std::fabs(double(after[at]) - double(before[at])) <= allowed,
                      claim + ": " + before_ref.name + index_text(before_ref.dims, int64_t(at)) + " is " + show(before[at]) +
                          " before and " + show(after[at]) + " after, more than the bounds' " + show(allowed) + " apart\n" +
                          describe(c));
  }
}

template <class T>
void layer_agrees(Checker& check) {
  const LayerCase<T> c = draw_layer<T>(check);
  const bool with_weights = check.claims(ATTNCHECK_CAP_MHA_WEIGHTS);
  std::vector<T> weights;
  const std::vector<T> out = check.run_layer(c, with_weights ? &weights : nullptr);
  require_layer_agreement(check, c, out, with_weights ? &weights : nullptr, layer_reference(c.layer()),
                          "the layer against its oracle");
}

#define ATTNCHECK_INSTANTIATE(T)                                                                                               \
  template LayerCase<T> draw_layer(Checker&, CaseLimits);                                                                      \
  template void require_layer_agreement(Checker&, const LayerCase<T>&, const std::vector<T>&, const std::vector<T>*,           \
                                        const LayerReference&, const std::string&);                                            \
  template void require_close(Checker&, const LayerCase<T>&, const std::vector<T>&, const std::vector<T>&, const ExactTensor&, \
                              const ExactTensor&, const std::string&);                                                         \
  template void layer_agrees<T>(Checker&);
ATTNCHECK_INSTANTIATE(float)
ATTNCHECK_INSTANTIATE(double)
#undef ATTNCHECK_INSTANTIATE

}  // namespace attncheck
