// Claim: the implementation agrees with the oracle within the bound, and passes the precision gate,
// on every generated case in float (random, structured and extreme inputs; every mask combination);
// so does its log-sum-exp when it returns one.
#include "attncheck/agrees_with_oracle_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(AgreesWithOracleInFloat, .order = 10, .catches = "element_off_1e3") { agrees<float>(check); }

}  // namespace attncheck::properties
