// The restriction table: every row refuses the call that breaks its rule alone and keeps the one
// that follows it, the choke point names what it refuses, and a declared domain is checked.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "attncheck/domain.hpp"

namespace attncheck {
namespace {

// A call inside every restriction (causal lower-right, square, default scale, dk = dv = 4, a
// self-attention layer with D = H dk and no bias), and one changed to break the rule of `bit` alone.
CallView inside() {
  CallView call;
  call.shape = {1, 2, 3, 3, 4, 4};
  call.masks.causal = Causal::lower_right;
  call.layer = true;
  call.self_attention = true;
  call.D = 8;
  return call;
}
CallView breaking(uint32_t bit) {
  CallView call = inside();
  switch (bit) {
    case ATTNCHECK_ONLY_CAUSAL:
      call.masks.causal = Causal::none;
      break;
    case ATTNCHECK_ONLY_LOWER_RIGHT:
      call.masks.causal = Causal::upper_left;
      break;
    case ATTNCHECK_ONLY_UPPER_LEFT:
      break;  // inside() is lower-right: it breaks this one already
    case ATTNCHECK_ONLY_SQUARE:
      call.shape.Tk = 5;
      break;
    case ATTNCHECK_ONLY_SELF_ATTENTION:
      call.self_attention = false;
      break;
    case ATTNCHECK_ONLY_DEFAULT_SCALE:
      call.scale = 0.5;
      break;
    case ATTNCHECK_ONLY_EQUAL_HEAD_DIMS:
      call.shape.dv = 2;
      call.D = 4;
      break;
    case ATTNCHECK_ONLY_LAYER_HEAD_WIDTH:
      call.biases = 2;
      break;
    case ATTNCHECK_ONLY_WITHIN_LIMITS:
      call.shape.dk = call.shape.dv = 3;
      call.D = 6;
      break;
    default:
      ADD_FAILURE() << "a restriction this test does not know: " << bit;
  }
  return call;
}

Domain only(uint32_t bit) {
  Domain d{bit, {}};
  if (bit == ATTNCHECK_ONLY_WITHIN_LIMITS) d.limits.widths = {4, 8};
  return d;
}

TEST(Domain, EachRowRefusesTheCallThatBreaksItsRuleAndNamesIt) {
  for (const Restriction& r : restrictions()) {
    const Domain d = only(r.bit);
    if (r.bit != ATTNCHECK_ONLY_UPPER_LEFT) {
      EXPECT_EQ(restrictions_broken(inside(), d), 0u) << r.name;
    }
    EXPECT_EQ(restrictions_broken(breaking(r.bit), d), r.bit) << r.name;
    EXPECT_NO_THROW(require_in_domain(breaking(r.bit), Domain{}));  // unrestricted: every call
    try {
      require_in_domain(breaking(r.bit), d);
      ADD_FAILURE() << r.name << " let a call through that breaks it";
    } catch (const OutsideDomain& e) {
      EXPECT_NE(std::string(e.what()).find(r.c_name), std::string::npos) << e.what();
    }
  }
}

TEST(Domain, BitsAndNamesAreEachUsedOnce) {
  std::set<uint32_t> bits;
  std::set<std::string> words, names;
  for (const Restriction& r : restrictions()) {
    EXPECT_TRUE(bits.insert(r.bit).second) << r.name;
    EXPECT_TRUE(words.insert(r.word).second) << r.word;
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_EQ(std::string(r.c_name).rfind("ATTNCHECK_ONLY_", 0), 0u) << r.c_name;
  }
  EXPECT_EQ(all_restrictions(), (uint32_t(ATTNCHECK_ONLY_WITHIN_LIMITS) << 1) - 1);  // every bit plugin.h defines
}

TEST(Domain, CausalWithNoAlignmentIsSquare) {
  const Domain d{ATTNCHECK_ONLY_CAUSAL, {}};
  EXPECT_TRUE(d.square());
  CallView call = inside();
  call.shape.Tk = 4;
  EXPECT_EQ(restrictions_broken(call, d), uint32_t(ATTNCHECK_ONLY_CAUSAL));
  EXPECT_EQ(restrictions_broken(call, Domain{ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_LOWER_RIGHT, {}}), 0u);
  EXPECT_TRUE(d.takes(Causal::upper_left) && d.takes(Causal::lower_right) && !d.takes(Causal::none));
  const Domain lower_right{ATTNCHECK_ONLY_LOWER_RIGHT, {}};
  EXPECT_TRUE(lower_right.takes(Causal::none));
  EXPECT_FALSE(lower_right.takes(Causal::upper_left));
}

TEST(Domain, LimitsTakeTheirWidthsAndShapes) {
  Limits l;
  l.width_multiple = 8;
  l.max_width = 32;
  EXPECT_EQ(l.widths_up_to(64), (std::vector<int64_t>{8, 16, 24, 32}));
  l.widths = {64, 128};
  EXPECT_TRUE(l.takes_width(64) && !l.takes_width(8));
  l.max_Tk = 16;
  const Domain d{ATTNCHECK_ONLY_WITHIN_LIMITS, l};
  CallView call = inside();
  call.shape.dk = call.shape.dv = 64;
  EXPECT_EQ(restrictions_broken(call, d), 0u);
  call.shape.Tk = 17;
  EXPECT_EQ(restrictions_broken(call, d), uint32_t(ATTNCHECK_ONLY_WITHIN_LIMITS));
  EXPECT_EQ(limits_from_abi(limits_to_abi(l)), l);
  EXPECT_EQ(limits_text(l), "head widths 64 128, Tk <= 16");
}

TEST(Domain, ADeclaredDomainThatCannotBeKeptIsSaid) {
  EXPECT_EQ(domain_error(Domain{ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_LOWER_RIGHT, {}}), "");
  EXPECT_NE(domain_error(Domain{ATTNCHECK_ONLY_LOWER_RIGHT | ATTNCHECK_ONLY_UPPER_LEFT, {}}).find("one alignment"),
            std::string::npos);
  EXPECT_NE(domain_error(Domain{1u << 20, {}}).find("no ATTNCHECK_ONLY_"), std::string::npos);
  Limits none;
  none.width_multiple = 64;
  none.max_width = 32;
  EXPECT_NE(domain_error(Domain{ATTNCHECK_ONLY_WITHIN_LIMITS, none}).find("take no head width"), std::string::npos);
  EXPECT_NE(domain_error(Domain{0, none}).find("without ATTNCHECK_ONLY_WITHIN_LIMITS"), std::string::npos);
  Limits negative;
  negative.max_B = -1;
  EXPECT_NE(domain_error(Domain{ATTNCHECK_ONLY_WITHIN_LIMITS, negative}).find("below 0"), std::string::npos);
  Limits wide;
  wide.widths = {64, kWidestHead + 1};
  EXPECT_NE(domain_error(Domain{ATTNCHECK_ONLY_WITHIN_LIMITS, wide}).find("wider than any"), std::string::npos);
  wide = {};
  wide.width_multiple = 1 << 30;
  EXPECT_NE(domain_error(Domain{ATTNCHECK_ONLY_WITHIN_LIMITS, wide}).find("wider than any"), std::string::npos);
  EXPECT_NE(domain_error(Domain{ATTNCHECK_ONLY_CAUSAL, {}}, ATTNCHECK_CAP_F32).find("without claiming causal"),
            std::string::npos);
  EXPECT_EQ(domain_error(Domain{ATTNCHECK_ONLY_CAUSAL, {}}, ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_CAUSAL), "");
}

}  // namespace
}  // namespace attncheck
