// The feature table: every row's predicate sees its own use and no other row's, and the choke point
// refuses exactly the features not claimed, naming them.
#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <string>

#include "attncheck/abi.hpp"
#include "attncheck/features.hpp"

namespace attncheck {
namespace {

// A plain call (f32, no mask, no option) changed to use the feature of `capability` alone.
CallView using_only(uint32_t capability) {
  static const uint8_t allow[1] = {1};
  static const int32_t lengths[1] = {1};
  CallView call;
  call.shape = {1, 2, 1, 1, 1, 1};
  if (capability & kFormatCapabilities) call.format = Format(std::countr_zero(capability));
  for (const Slot& s : kSlots)  // an input the feature brings (call_schema.hpp)
    if (s.input && s.feature == capability) call.inputs |= 1u << index_of(s);
  switch (capability) {
    case ATTNCHECK_CAP_ALLOW:
      call.masks.allow = allow;
      break;
    case ATTNCHECK_CAP_CAUSAL:
      call.masks.causal = Causal::lower_right;
      break;
    case ATTNCHECK_CAP_KV_LENS:
      call.masks.key_lengths = lengths;
      break;
    case ATTNCHECK_CAP_GQA:
      call.shape.H_kv = 1;
      break;
    case ATTNCHECK_CAP_WINDOW:
      call.masks.window_right = 0;
      break;
    case ATTNCHECK_CAP_SOFTCAP:
      call.softcap = 30;
      break;
    case ATTNCHECK_CAP_BIAS:
      call.bias = true;
      break;
    case ATTNCHECK_CAP_LSE:
      call.lse = true;
      break;
    case ATTNCHECK_CAP_BACKWARD:
      call.backward = true;
      break;
    case ATTNCHECK_CAP_DROPOUT:
      call.dropout_p = 0.5;
      break;
    case ATTNCHECK_CAP_DROPOUT_MASK:
      call.keep = true;
      break;
    case ATTNCHECK_CAP_MHA:
      call.layer = true;
      break;
    case ATTNCHECK_CAP_MHA_WEIGHTS:
      call.layer_weights = true;
      break;
    case ATTNCHECK_CAP_KV_CACHE:
      call.masks.causal = Causal::kv_end;  // a causal mode: it uses causal, the feature it extends, too
      break;
    case ATTNCHECK_CAP_PAGED_KV:
      call.shape.NB = call.shape.BS = call.shape.BPS = 1;  // pools of one block of one key
      break;
    case ATTNCHECK_CAP_VARLEN:
      call.shape.varlen = true;  // its sequences packed
      break;
    default:
      break;
  }
  return call;
}

TEST(Features, EachRowSeesItsOwnUseAlone) {
  for (const Feature& f : features()) {
    const uint32_t base = f.capability & kFormatCapabilities ? 0u : uint32_t(ATTNCHECK_CAP_F32);
    const uint32_t extended = f.capability == ATTNCHECK_CAP_KV_CACHE ? f.needs : 0u;
    EXPECT_EQ(features_used(using_only(f.capability)), f.capability | base | extended) << f.name;
  }
}

TEST(Features, BitsNamesAndFlagsAreEachUsedOnce) {
  std::set<uint32_t> bits, flags;
  std::set<std::string> words, names;
  for (const Feature& f : features()) {
    EXPECT_TRUE(bits.insert(f.capability).second) << f.name;
    EXPECT_TRUE(words.insert(f.word).second) << f.word;
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_TRUE(f.protocol_flag == 0 || flags.insert(f.protocol_flag).second) << f.name;
    EXPECT_EQ(std::string(f.c_name).rfind("ATTNCHECK_CAP_", 0), 0u) << f.c_name;
  }
  const uint32_t highest = std::bit_floor(all_capabilities());
  EXPECT_EQ(all_capabilities(), (highest << 1) - 1);  // every bit from the first to the highest a row has, none skipped
  EXPECT_EQ(all_capabilities() & kLayerOnly, 0u);     // the checker's own bit is no row's
}

TEST(Features, TheChokePointRefusesWhatIsNotClaimedAndNamesIt) {
  for (const Feature& f : features()) {
    const CallView call = using_only(f.capability);
    EXPECT_NO_THROW(require_claimed(call, all_capabilities())) << f.name;
    try {
      require_claimed(call, all_capabilities() & ~f.capability);
      ADD_FAILURE() << f.name << " was let through unclaimed";
    } catch (const UnclaimedFeature& e) {
      EXPECT_NE(std::string(e.what()).find(f.c_name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(f.name), std::string::npos) << e.what();
    }
  }
}

TEST(Features, TheViewReadsWhatTheProblemCarries) {
  float x[2] = {0, 0};
  const int32_t lengths[1] = {1};
  Problem<float> p;
  p.format = Format::bf16;
  p.shape = {1, 2, 1, 1, 1, 1, 1};
  p.q = p.k = p.v = x;
  p.masks.key_lengths = lengths;
  p.masks.window_left = 3;
  EXPECT_EQ(features_used(call_view(p, true, false)),
            uint32_t(ATTNCHECK_CAP_BF16 | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA | ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_LSE));
  // In a backward the lse is the forward's, an input: not asked.
  EXPECT_EQ(features_used(call_view(p, true, true)), uint32_t(ATTNCHECK_CAP_BF16 | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA |
                                                              ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_BACKWARD));
  // The keep mask is asked only of a call with dropout.
  EXPECT_EQ(features_used(call_view(p, false, false, true)) & ATTNCHECK_CAP_DROPOUT_MASK, 0u);
  p.dropout_p = 0.25;
  EXPECT_EQ(features_used(call_view(p, false, false, true)) & (ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK),
            uint32_t(ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK));
}

}  // namespace
}  // namespace attncheck
