// What the layer's properties share (properties/layer_*.cpp): drawing a layer the kernel can take,
// and judging its out and weights against the layer's oracle with the suite's one comparator (the
// whole check of LayerAgreesWithOracle and LayerAgreesWithOracleInDouble: layer_agrees).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "attncheck/layer_oracle.hpp"
#include "attncheck/property.hpp"

namespace attncheck {

// A layer within the kernel's limits and claims, under its empty-row policy: a row with no
// permitted key has head output 0, NaN, the mean of its values, or anything (unchecked).
template <class T>
LayerCase<T> draw_layer(Checker& check, CaseLimits base = {});

// Fails unless out [B,Tq,D] and, when given, weights [B,H,Tq,Tk] agree with `reference` for c (the
// rigorous gate), and each row of weights that carries weight sums to one within its bounds.
template <class T>
void require_layer_agreement(Checker& check, const LayerCase<T>& c, const std::vector<T>& out,
                             std::type_identity_t<const std::vector<T>*> weights, const LayerReference& reference,
                             const std::string& claim);

// Fails unless every element of `after` is within the sum of both bounds of `before` (two results of
// layers with the same exact out): what a metamorphic relation asks of a correct kernel.
template <class T>
void require_close(Checker& check, const LayerCase<T>& c, const std::vector<T>& before, const std::vector<T>& after,
                   const ExactTensor& before_ref, const ExactTensor& after_ref, const std::string& claim);

// A drawn layer's out (and each head's weights, when the kernel returns them) against the layer's
// oracle.
template <class T>
void layer_agrees(Checker& check);

}  // namespace attncheck
