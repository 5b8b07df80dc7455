// The multi-head layer's reference (layer.hpp): the projections computed exactly, rounded to the
// layer's format as a kernel that stores them would, attention per head by the oracle, the heads
// merged and projected exactly; and for each element a bound on |computed - exact| of any correct
// implementation, which carries the projections' rounding through the scores, the values and the
// output projection (docs/error-bound.md, "The layer").
#pragma once

#include "attncheck/layer.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {

// out [B,Tq,D] and weights [B,H,Tq,Tk] (each head's softmax; 0 at a forbidden key). Inputs that are
// not finite give exact NaN and bound +inf: the layer is checked on finite inputs.
struct LayerReference {
  ExactTensor out, weights;
};

template <class T>
LayerReference layer_reference(const Layer<T>& layer);

}  // namespace attncheck
