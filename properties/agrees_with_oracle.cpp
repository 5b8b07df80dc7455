// Claim: the implementation agrees with the oracle within the bound, and passes the precision gate,
// on every generated case (random, structured and extreme inputs; every mask combination).
#include "attncheck/property.hpp"

namespace attncheck::properties {

void AgreesWithOracleInFloat(Checker& check) {
  const Case<float> c = check.draw<float>();
  require_agreement(check, c, check.run(c), reference(c.problem()), "agrees with the oracle");
}

void AgreesWithOracleInDouble(Checker& check) {
  if (!check.has_f64()) return;  // the plugin has no attncheck_forward_f64: nothing to claim
  const Case<double> c = check.draw<double>();
  require_agreement(check, c, check.run(c), reference(c.problem()), "agrees with the oracle");
}

}  // namespace attncheck::properties
