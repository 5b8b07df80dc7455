// Claim: the implementation agrees with the oracle within the bound, and passes the precision gate,
// on every generated case in double (random, structured and extreme inputs; every mask
// combination); so does its log-sum-exp when it returns one.
#include "attncheck/agrees_with_oracle_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(AgreesWithOracleInDouble, .order = 170, .catches = "nan_element", .double_precision = true) {
  agrees<double>(check);
}

}  // namespace attncheck::properties
