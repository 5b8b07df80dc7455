// Claim: paged K and V give the dense answer: the keys laid out in a pool of blocks of 1, 2, 16 or
// a size not a power of two, at shuffled places among unused blocks, read through the block table,
// agree with the oracle's output and lse of the same keys dense, within the bound; every slot no key
// fills holds a poison (NaN, inf, 1e30) that no output may see.
#include "attncheck/paged_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(PagedEqualsDense, .order = 250, .catches = "paged_block_index_off_by_one", .needs = ATTNCHECK_CAP_PAGED_KV) {
  const Case<float> paged = draw_paged(check).c;
  std::vector<float> lse;
  const std::vector<float> out = check.run_with_lse(paged, lse);
  require_agreement(check, paged, out, reference(dense_twin(paged).problem()),
                    "paged K and V agree with the oracle's dense answer", lse_if_any(lse));
}

}  // namespace attncheck::properties
