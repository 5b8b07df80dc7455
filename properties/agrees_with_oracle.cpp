// Claim: the implementation agrees with the oracle within the bound, and passes the precision gate,
// on every generated case (random, structured and extreme inputs; every mask combination).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "attncheck/property_support.hpp"

namespace attncheck {

RC_GTEST_PROP(Property, AgreesWithOracleInFloat, ()) {
  const Case<float> c = draw<float>();
  require_agreement(c, run_kernel(c), reference(c.problem()), "agrees with the oracle");
}

RC_GTEST_PROP(Property, AgreesWithOracleInDouble, ()) {
  if (!has_f64()) RC_SUCCEED("the kernel has no attncheck_forward_f64");
  const Case<double> c = draw<double>();
  require_agreement(c, run_kernel(c), reference(c.problem()), "agrees with the oracle");
}

}  // namespace attncheck
