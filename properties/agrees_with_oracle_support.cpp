#include "attncheck/agrees_with_oracle_support.hpp"

#include <limits>

namespace attncheck::properties {

template <class T>
void agrees(Checker& check) {
  const Case<T> c = check.draw<T>();
  std::vector<T> lse;
  const std::vector<T> out = check.run_with_lse(c, lse);
  require_agreement(check, c, out, reference(c.problem()), "agrees with the oracle", lse_if_any(lse));
}

template <class T>
void backward_agrees(Checker& check, bool softcap) {
  Case<T> c = check.draw<T>({.small_only = true});
  c.empty_rows = EmptyRows::zero;  // the backward's contract: an empty row gives dq 0
  if (softcap) c.softcap = check.one_of({1.0, 2.0, 5.0});
  // dout [B,H,Tq,dv]: standard normal values of the case's format, from one seeded stream.
  SeededChooser values(check.below(std::numeric_limits<uint64_t>::max()));
  std::vector<T> dout(size_t(c.shape.out_size()));
  for (T& x : dout) x = T(round_to(c.format, standard_normal(values)));
  const GradReference<T> reference = reference_backward(c.problem(), dout.data());
  require_gradients(check, c, check.gradients(c, reference, dout), reference, dout, "the backward agrees with the oracle");
}

template void agrees<float>(Checker&);
template void agrees<double>(Checker&);
template void backward_agrees<float>(Checker&, bool);
template void backward_agrees<double>(Checker&, bool);

}  // namespace attncheck::properties
