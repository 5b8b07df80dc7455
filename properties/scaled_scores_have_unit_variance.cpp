// Claim: for iid zero-mean unit-variance q and k components in dimension d, q.k has variance d and
// the implementation's scaled score q.k/sqrt(d) variance 1 (the reason for the scale). Exact test:
// with Gaussian q, s = c q.k given k is N(0, c^2 |k|^2), so T = sum_i d s_i^2 / |k_i|^2 is
// chi-square with N degrees of freedom when c = 1/sqrt(d). Accepting T/N in the two-sided
// chi-square interval of probability 1 - 1e-9 makes a false alarm less likely than 1e-9 per check.
// Fixed seeds: the outcome is the same on every run.
#include <boost/math/distributions/chi_squared.hpp>
#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {
namespace {

constexpr int64_t kN = 4096;
constexpr double kFalseAlarm = 1e-9;

// [lo, hi] for T/N under chi-square with n degrees of freedom, two-sided probability kFalseAlarm outside.
std::pair<double, double> acceptance(int64_t n) {
  const boost::math::chi_squared chi2{static_cast<double>(n)};
  return {quantile(chi2, kFalseAlarm / 2) / double(n), quantile(complement(chi2, kFalseAlarm / 2)) / double(n)};
}

// N two-key problems, one per head: q Gaussian, k_1 Gaussian, k_2 = 0, v_1 = e_1, v_2 = e_2, so
// that out = (sigmoid(s), 1 - sigmoid(s)) and the kernel's score is s = log(out_1 / out_2); in the
// kernel's domain (with_last_query; v as wide as q under dk = dv), read off the last query.
Case<float> score_probe(const Checker& check, int64_t d, uint64_t seed) {
  SeededChooser choose(seed);
  Case<float> c;
  c.shape = {1, kN, 1, 2, d, 2};
  c.mix = "score probe";
  for (int64_t h = 0; h < kN; ++h) {
    for (int64_t k = 0; k < d; ++k) c.q.push_back(float(standard_normal(choose)));
    for (int64_t k = 0; k < d; ++k) c.k.push_back(float(standard_normal(choose)));
    c.k.insert(c.k.end(), size_t(d), 0.0f);
    c.v.insert(c.v.end(), {1, 0, 0, 1});
  }
  if (check.domain().only(ATTNCHECK_ONLY_EQUAL_HEAD_DIMS)) c = with_value_width(c, d);
  return with_last_query(check, c);
}

// T/N: (1/N) sum_i d s_i^2 / |k_i|^2 with s_i read off the outputs, or (q.k_i)^2/|k_i|^2 unscaled
// from the inputs alone. c: the probe; out [1,N,1,2] or empty.
double statistic(const Case<float>& c, const std::vector<float>& out) {
  const Shape& shape = c.shape;
  const int64_t d = shape.dk;
  double total = 0;
  for (int64_t h = 0; h < kN; ++h) {
    double qk = 0, k_norm2 = 0;
    for (int64_t k = 0; k < d; ++k) {
      qk += double(c.q[size_t(shape.q_at(0, h, last_query(c)) + k)]) * c.k[size_t(shape.k_at(0, h, 0) + k)];
      k_norm2 += double(c.k[size_t(shape.k_at(0, h, 0) + k)]) * c.k[size_t(shape.k_at(0, h, 0) + k)];
    }
    const size_t row = size_t(shape.out_at(0, h, last_query(c)));
    const double s = out.empty() ? qk : std::log(double(out[row]) / double(out[row + 1]));
    total += (out.empty() ? 1.0 : double(d)) * s * s / k_norm2;
  }
  return total / double(kN);
}

}  // namespace

ATTNCHECK_PROPERTY(ScaledScoresHaveUnitVariance, .order = 180, .catches = "model_width_scale", .generated = false,
                   .float32_cases = true, .leaves = ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const auto [lo, hi] = acceptance(kN);
  for (int64_t d : {4, 16, 64, 256}) {
    const Case<float> probe = score_probe(check, d, 1000 + uint64_t(d));
    const double raw = statistic(probe, {}), scaled = statistic(probe, check.run(probe));
    ATTNCHECK_REQUIRE(check, raw >= lo && raw <= hi,
                      "d " + std::to_string(d) + ": the generator's q.k/|k| has variance " + show(raw) + ", outside [" +
                          show(lo) + ", " + show(hi) + "]");
    ATTNCHECK_REQUIRE(check, scaled >= lo && scaled <= hi,
                      "d " + std::to_string(d) + ": d s^2/|k|^2 averages " + show(scaled) + ", outside [" + show(lo) + ", " +
                          show(hi) + "]: the scores are not scaled by 1/sqrt(d) (1/H = " + show(1.0 / double(kN)) +
                          " would mean 1/sqrt(H dk), d would mean no scale)");
  }
}

}  // namespace attncheck::properties
