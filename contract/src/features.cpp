#include "attncheck/features.hpp"

namespace attncheck {

const Feature& feature(uint32_t capability) {
  for (const Feature& f : kFeatures)
    if (f.capability == capability) return f;
  throw std::logic_error("no feature has capability bit " + std::to_string(capability));
}

uint32_t all_capabilities() {
  uint32_t bits = 0;
  for (const Feature& f : kFeatures) bits |= f.capability;
  return bits;
}

std::string feature_names(uint32_t bits) {
  std::string names;
  for (const Feature& f : kFeatures)
    if (bits & f.capability) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names.empty() ? "none" : names;
}

uint32_t features_used(const CallView& call) {
  uint32_t bits = 0;
  for (const Feature& f : kFeatures)
    if (f.used(call)) bits |= f.capability;
  return bits;
}

void require_claimed(const CallView& call, uint32_t capabilities) {
  const uint32_t unclaimed = features_used(call) & ~capabilities;
  if (!unclaimed) return;
  std::string bits;
  for (const Feature& f : kFeatures)
    if (unclaimed & f.capability) bits += (bits.empty() ? "" : " | ") + std::string(f.c_name);
  throw UnclaimedFeature("a problem using " + feature_names(unclaimed) + " (" + bits + "), which the kernel does not claim");
}

std::string harness_error(const std::string& property, const UnclaimedFeature& unclaimed) {
  return "harness error: Property." + property + " sent " + unclaimed.what() + ": a bug of attncheck's, not of the kernel";
}

}  // namespace attncheck
