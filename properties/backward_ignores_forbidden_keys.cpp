// Claim: a key no query may see (padding, a masked-out column, a key past every window) gets
// exactly zero dK and dV, and its k and v, even poisoned with NaN, inf or 1e30, change no gradient
// of anything else (any NaN equals any NaN, everything else keeps its bits). A backward that takes
// P = exp(s - lse) at every key without the masks (flash-attention 1947) fails here.
#include <limits>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BackwardIgnoresForbiddenKeys, .order = 35, .catches = "p_not_zeroed_at_masked", .backward = true) {
  Case<float> c = check.draw<float>({.small_only = true});
  c.empty_rows = EmptyRows::zero;
  const Shape& s = c.shape;
  // The keys of each batch that no query may see, by the masks.
  std::vector<uint8_t> unseen(size_t(s.B * s.Tk), 1);  // [B,Tk]
  bool any = false;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t j = 0; j < s.Tk; ++j) {
      for (int64_t i = 0; i < s.Tq; ++i) unseen[size_t(b * s.Tk + j)] &= !c.permits(b, i, j);
      any |= unseen[size_t(b * s.Tk + j)] != 0;
    }
  check.classify(any, "a key no query sees");
  if (!any) return;
  SeededChooser values(check.below(std::numeric_limits<uint64_t>::max()));
  std::vector<float> dout(size_t(s.out_size()));
  for (float& x : dout) x = float(round_to(c.format, standard_normal(values)));
  const GradReference<float> reference = reference_backward(c.problem(), dout.data());
  const Checker::Gradients<float> clean = check.gradients(c, reference, dout);
  require_gradients(check, c, clean, reference, dout, "the backward, before anything is poisoned");

  const std::vector<float> poisons = forbidden_poisons(check, c.format);
  Case<float> poisoned = c;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.kv_heads(); ++g)
      for (int64_t j = 0; j < s.Tk; ++j)
        if (unseen[size_t(b * s.Tk + j)]) {
          const float poison = poisons[size_t(check.in_range(0, int64_t(poisons.size())))];
          const int64_t h = g * (s.H / s.kv_heads());  // the first query head reading KV head g
          std::fill_n(poisoned.k.begin() + s.k_at(b, h, j), s.dk, poison);
          std::fill_n(poisoned.v.begin() + s.v_at(b, h, j), s.dv, poison);
        }
  const Checker::Gradients<float> dirty = check.gradients(poisoned, reference, dout);
  // A kernel whose answers vary between identical calls is not held to bits (answers_vary): dq, dk
  // and dv as one vector.
  auto joined = [](const Checker::Gradients<float>& g) {
    std::vector<float> all = g.dq;
    all.insert(all.end(), g.dk.begin(), g.dk.end());
    all.insert(all.end(), g.dv.begin(), g.dv.end());
    return all;
  };
  const std::vector<float> clean_all = joined(clean), dirty_all = joined(dirty);
  std::vector<size_t> every(clean_all.size());
  for (size_t n = 0; n < every.size(); ++n) every[n] = n;
  if (!keeps_bits(clean_all, dirty_all, every) &&
      answers_vary([&] { return joined(check.gradients(c, reference, dout)); }, clean_all,
                   [&] { return joined(check.gradients(poisoned, reference, dout)); }, dirty_all, every))
    return;
  const std::pair<const char*, std::pair<const std::vector<float>*, const std::vector<float>*>> tensors[] = {
      {"dq", {&clean.dq, &dirty.dq}}, {"dk", {&clean.dk, &dirty.dk}}, {"dv", {&clean.dv, &dirty.dv}}};
  for (const auto& [name, pair] : tensors)
    for (size_t n = 0; n < pair.first->size(); ++n)
      ATTNCHECK_REQUIRE(check, unchanged((*pair.first)[n], (*pair.second)[n]),
                        std::string(name) + "[" + std::to_string(n) + "] changed from " + show((*pair.first)[n]) + " to " +
                            show((*pair.second)[n]) + " when only keys no query may see were poisoned\n" + describe(poisoned));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.kv_heads(); ++g)
      for (int64_t j = 0; j < s.Tk; ++j) {
        if (!unseen[size_t(b * s.Tk + j)]) continue;
        const int64_t h = g * (s.H / s.kv_heads());
        for (int64_t k = 0; k < s.dk; ++k)
          ATTNCHECK_REQUIRE(check, dirty.dk[size_t(s.k_at(b, h, j) + k)] == 0,
                            "dk of key " + std::to_string(j) + " (batch " + std::to_string(b) + "), which no query may see, is " +
                                show(dirty.dk[size_t(s.k_at(b, h, j) + k)]) + ", not 0\n" + describe(poisoned));
        for (int64_t col = 0; col < s.dv; ++col)
          ATTNCHECK_REQUIRE(check, dirty.dv[size_t(s.v_at(b, h, j) + col)] == 0,
                            "dv of key " + std::to_string(j) + " (batch " + std::to_string(b) + "), which no query may see, is " +
                                show(dirty.dv[size_t(s.v_at(b, h, j) + col)]) + ", not 0\n" + describe(poisoned));
      }
}

}  // namespace attncheck::properties
