// Claim: where a block sits in the pool is not what it means: the pool's blocks permuted, the table
// renamed to follow them, every output stays within both calls' bounds of where it was.
#include <numeric>

#include "attncheck/paged_support.hpp"

namespace attncheck::properties {

namespace {

// c with pool block n moved to place moved_to[n] ([NB]), the table following: K [NB,H_kv,BS,dk] and V
// [NB,H_kv,BS,dv] permuted by whole blocks, the table [B,BPS] renamed.
Case<float> moved(const Case<float>& c, const std::vector<int32_t>& moved_to) {
  const Shape& s = c.shape;
  Case<float> r = c;
  const int64_t k_block = s.kv_heads() * s.BS * s.dk, v_block = s.kv_heads() * s.BS * s.dv;
  for (int64_t n = 0; n < s.NB; ++n) {
    std::copy_n(c.k.begin() + n * k_block, k_block, r.k.begin() + moved_to[size_t(n)] * k_block);
    std::copy_n(c.v.begin() + n * v_block, v_block, r.v.begin() + moved_to[size_t(n)] * v_block);
  }
  for (int32_t& entry : r.block_table) entry = moved_to[size_t(entry)];
  return r;
}

}  // namespace

ATTNCHECK_PROPERTY(PoolBlocksMoveWithTheirTable, .order = 251, .catches = "paged_table_ignored",
                   .needs = ATTNCHECK_CAP_PAGED_KV) {
  const Case<float> before = draw_paged(check).c;
  const Shape& s = before.shape;
  std::vector<int32_t> moved_to(size_t(s.NB));  // a rotation by one: every block moves when there are two
  std::iota(moved_to.begin(), moved_to.end(), 1);
  moved_to.back() = 0;
  const Case<float> after = moved(before, moved_to);
  const std::vector<float> out_before = check.run(before), out_after = check.run(after);
  const Reference ref = reference(dense_twin(before).problem());  // the same dense twin for both
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        require_rows_agree(
            check, out_before, ref, size_t(s.out_at(b, h, i)), out_after, ref, size_t(s.out_at(b, h, i)), s.dv,
            [&](int64_t col, double x, double y, double allowed) {
              return "out[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," + std::to_string(col) +
                     "] moved from " + show(x) + " to " + show(y) + " (more than its bounds, " + show(allowed) +
                     ") when only the pool's blocks moved, each one place on, the table with them\n" + describe(before);
            });
}

}  // namespace attncheck::properties
