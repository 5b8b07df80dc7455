#include "attncheck/dropout_support.hpp"

#include <algorithm>
#include <cmath>

#include "attncheck/oracle.hpp"

namespace attncheck {

double draw_dropout_rate(Checker& check, bool asymmetric) {
  return asymmetric ? check.one_of({0.25, 0.75, 0.1, 0.9}) : check.one_of({0.5, 0.25, 0.75, 0.1, 0.9});
}

Case<float> with_dropout(Checker& check, Case<float> c, double p) {
  c = with_finite_inputs(std::move(c));
  c.dropout_p = p;
  c.dropout_seed = check.below(uint64_t(1) << 32);
  return c;
}

Case<float> with_weight_values(Case<float> c) {
  const Shape s = c.shape;
  c.shape.dv = s.Tk + 1;
  c.v.assign(size_t(c.shape.v_size()), 0.0f);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t j = 0; j < s.Tk; ++j) {
        c.v[size_t(c.shape.v_at(b, h, j) + j)] = 1;
        c.v[size_t(c.shape.v_at(b, h, j) + s.Tk)] = 1;
      }
  return c;
}

Reference undropped_weights(const Case<float>& c) {
  Case<float> undropped = c;
  undropped.dropout_p = 0;
  return reference(undropped.problem());
}

std::vector<uint8_t> keep_read_off(const Case<float>& c, const std::vector<float>& out, const Reference& weights) {
  // out [B,H,Tq,Tk+1] in; keep [B,H,Tq,Tk] out; weights: undropped_weights(c).
  const Shape& s = c.shape;
  const double rescale = dropout_rescale(c.dropout_p);
  std::vector<uint8_t> keep(size_t(s.scores_size()), 0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) {
          const double kept = double(weights.out.exact[size_t(s.out_at(b, h, i) + j)]) * rescale;
          const double seen = out[size_t(s.out_at(b, h, i) + j)];
          keep[size_t(s.scores_at(b, h, i) + j)] = kept > 0 && std::fabs(seen - kept) < std::fabs(seen);
        }
  return keep;
}

Reference read_off_reference(const Case<float>& c, const std::vector<uint8_t>& keep, const Reference& weights,
                             const std::vector<float>& out) {
  // keep [B,H,Tq,Tk]; out and the reference's out [B,H,Tq,Tk+1]; weights: undropped_weights(c).
  Reference ref = reference(with_keep(c, keep));
  const Shape& s = c.shape;
  const double rescale = dropout_rescale(c.dropout_p);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const size_t at = size_t(s.out_at(b, h, i));
        // The sum column lies between the read sum less the unreadable weights read as kept and the
        // read sum plus those read as dropped (each with its own bound).
        double less = 0, more = 0;
        for (int64_t j = 0; j < s.Tk; ++j) {
          const double kept = double(weights.out.exact[at + size_t(j)]) * rescale;
          if (!std::isfinite(kept) || kept > ref.out.bound[at + size_t(j)]) continue;  // readable
          const double most = kept + weights.out.bound[at + size_t(j)] * rescale;
          (keep[size_t(s.scores_at(b, h, i) + j)] ? less : more) += most;
        }
        if (less + more == 0 || !ref.out.row_is_exact(s.lse_at(b, h, i))) continue;
        const size_t sum = at + size_t(s.Tk);
        // less and more as summed in double: each end moved out by more than their rounding.
        const long double lowest = ref.out.exact[sum] - less * (1 + 0x1p-50), highest = ref.out.exact[sum] + more * (1 + 0x1p-50),
                          seen = out[sum];
        if (std::isnan(double(seen))) continue;  // a NaN is wrong wherever the interval lies
        ref.out.exact[sum] = std::clamp(seen, lowest, highest);
      }
  return ref;
}

Case<float> uniform_dropout_case(double p, uint64_t seed) {
  Case<float> c;
  c.shape = {.B = 2, .H = 2, .Tq = 64, .Tk = 64, .dk = 65, .dv = 1};
  c.q.assign(size_t(c.shape.q_size()), 0.0f);
  c.k.assign(size_t(c.shape.k_size()), 1.0f);
  c.v.assign(size_t(c.shape.v_size()), 0.0f);
  c.dropout_p = p;
  c.dropout_seed = seed;
  c.mix = "uniform weights for dropout's statistics";
  return with_weight_values(c);
}

std::vector<uint8_t> uniform_keep_mask(Checker& check, double p, uint64_t seed) {
  const Case<float> c = uniform_dropout_case(p, seed);
  const std::vector<float> out = check.run(c);
  const Shape& s = c.shape;
  const double kept = dropout_rescale(p) / double(s.Tk);
  std::vector<uint8_t> keep(size_t(s.scores_size()));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) keep[size_t(s.scores_at(b, h, i) + j)] = out[size_t(s.out_at(b, h, i) + j)] > kept / 2;
  // Each weight 0 or 1 / (64 (1 - p)), and their sums, for the mask read: else the mask is no mask.
  require_agreement<float>(check, c, out, reference(with_keep(c, keep)),
                           "dropout at p = " + show(p) + " on uniform weights 1/64, V = [I | 1]", nullptr, &keep);
  return keep;
}

double agreement(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int64_t first, int64_t second, int64_t n) {
  int64_t same = 0;
  for (int64_t t = 0; t < n; ++t) same += a[size_t(first + t)] == b[size_t(second + t)];
  return double(same) / double(n);
}

}  // namespace attncheck
