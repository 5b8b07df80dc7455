// Every property, in the order `attncheck check` tries them: cheap and high-yield first.
#include "attncheck/property.hpp"

namespace attncheck {
namespace properties {
void AgreesWithOracleInFloat(Checker&);
void AgreesWithOracleInDouble(Checker&);
void ForbiddenKeysAndValuesCannotChangeValidOutputs(Checker&);
void EmptyRowsFollowThePolicy(Checker&);
void DefaultScaleIsOneHeadsWidth(Checker&);
void ExplicitScaleIsHonoured(Checker&);
void ShiftInvarianceOfSoftmax(Checker&);
void ShiftInvarianceOfAttention(Checker&);
void RowsSumToOne(Checker&);
void OutputsLieBetweenPermittedValues(Checker&);
void SelectionAndAveragePooling(Checker&);
void CausalPrefixIgnoresTheFuture(Checker&);
void PermutingKeysOrQueries(Checker&);
void BatchAndHeadIndependence(Checker&);
void AllTrueMaskEqualsNoMask(Checker&);
void KeyPaddingMaskConvertsByFlipping(Checker&);
void ScaleReadOffTwoKeys(Checker&);
void ScaledScoresHaveUnitVariance(Checker&);
void UnscaledSoftmaxSaturatesAsDGrows(Checker&);
void ScaledSoftmaxStaysPutAsDGrows(Checker&);
}  // namespace properties

const std::vector<Property>& all_properties() {
  using namespace properties;
  static const std::vector<Property> all = {
      {"AgreesWithOracleInFloat", AgreesWithOracleInFloat, true},
      {"ScaleReadOffTwoKeys", ScaleReadOffTwoKeys, false},
      {"ForbiddenKeysAndValuesCannotChangeValidOutputs", ForbiddenKeysAndValuesCannotChangeValidOutputs, true},
      {"EmptyRowsFollowThePolicy", EmptyRowsFollowThePolicy, true},
      {"DefaultScaleIsOneHeadsWidth", DefaultScaleIsOneHeadsWidth, true},
      {"ShiftInvarianceOfSoftmax", ShiftInvarianceOfSoftmax, true},
      {"RowsSumToOne", RowsSumToOne, true},
      {"ShiftInvarianceOfAttention", ShiftInvarianceOfAttention, true},
      {"OutputsLieBetweenPermittedValues", OutputsLieBetweenPermittedValues, true},
      {"SelectionAndAveragePooling", SelectionAndAveragePooling, true},
      {"CausalPrefixIgnoresTheFuture", CausalPrefixIgnoresTheFuture, true},
      {"PermutingKeysOrQueries", PermutingKeysOrQueries, true},
      {"BatchAndHeadIndependence", BatchAndHeadIndependence, true},
      {"AllTrueMaskEqualsNoMask", AllTrueMaskEqualsNoMask, true},
      {"KeyPaddingMaskConvertsByFlipping", KeyPaddingMaskConvertsByFlipping, true},
      {"ExplicitScaleIsHonoured", ExplicitScaleIsHonoured, true},
      {"AgreesWithOracleInDouble", AgreesWithOracleInDouble, true, true},
      {"ScaledScoresHaveUnitVariance", ScaledScoresHaveUnitVariance, false, false, 5},
      {"UnscaledSoftmaxSaturatesAsDGrows", UnscaledSoftmaxSaturatesAsDGrows, false, false, 5},
      {"ScaledSoftmaxStaysPutAsDGrows", ScaledSoftmaxStaysPutAsDGrows, false, false, 5},
  };
  return all;
}

}  // namespace attncheck
