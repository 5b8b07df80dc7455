// Claim: the implementation agrees with the oracle within the bound, and passes the precision gate,
// on every generated case (random, structured and extreme inputs; every mask combination).
#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(AgreesWithOracleInFloat, .order = 10, .catches = "element_off_1e3") {
  const Case<float> c = check.draw<float>();
  require_agreement(check, c, check.run(c), reference(c.problem()), "agrees with the oracle");
}

ATTNCHECK_PROPERTY(AgreesWithOracleInDouble, .order = 170, .catches = "nan_element", .double_precision = true) {
  if (!check.has_f64()) return;  // the plugin has no attncheck_forward_f64: nothing to claim
  const Case<double> c = check.draw<double>();
  require_agreement(check, c, check.run(c), reference(c.problem()), "agrees with the oracle");
}

}  // namespace attncheck::properties
