// Claim: the implementation agrees with the oracle within the bound, and passes the precision gate,
// on every generated case (random, structured and extreme inputs; every mask combination); so does
// its log-sum-exp when it returns one.
#include "attncheck/property.hpp"

namespace attncheck::properties {

// The output, and the log-sum-exp when the implementation returns it.
template <class T>
void agrees(Checker& check) {
  const Case<T> c = check.draw<T>();
  std::vector<T> lse;
  const std::vector<T> out = check.run_with_lse(c, lse);
  require_agreement(check, c, out, reference(c.problem()), "agrees with the oracle", lse_if_any(lse));
}

ATTNCHECK_PROPERTY(AgreesWithOracleInFloat, .order = 10, .catches = "element_off_1e3") { agrees<float>(check); }

ATTNCHECK_PROPERTY(AgreesWithOracleInDouble, .order = 170, .catches = "nan_element", .double_precision = true) {
  agrees<double>(check);
}

}  // namespace attncheck::properties
