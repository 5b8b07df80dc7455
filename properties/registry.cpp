// The registry of properties, filled by ATTNCHECK_PROPERTY in the files that write them.
#include <algorithm>
#include <string>

#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"
#include "attncheck/property.hpp"

namespace attncheck {
namespace {

// A function's static, so that it exists before any file's registration runs.
std::vector<Property>& registered() {
  static std::vector<Property> properties;
  return properties;
}

}  // namespace

bool register_property(const Property& property) {
  registered().push_back(property);
  return true;
}

std::string not_applicable(const Property& p, uint32_t claimed, const Policies& policies, const Domain& domain) {
  // The backward's contract gives an empty row nothing (dq 0, no key's gradient): of a row whose
  // forward is a mean of values, or anything, it says nothing.
  if (p.backward && (policies.empty_rows == EmptyRows::mean || policies.empty_rows == EmptyRows::any))
    return std::string("checks the backward, whose empty rows give nothing, not under --empty-rows ") +
           empty_rows_word(policies.empty_rows);
  // Dropout is checked for rows with keys: an empty row's mean under the mean policy is the oracle's
  // without dropout.
  if ((p.needs & ATTNCHECK_CAP_DROPOUT) && policies.empty_rows == EmptyRows::mean)
    return "checks dropout, not under --empty-rows mean";
  if (!p.layer && (claimed & kLayerOnly)) return kLayerOnlySkip;
  const uint32_t float_formats = ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16;
  const uint32_t formats = p.double_precision ? uint32_t(ATTNCHECK_CAP_F64)
                           : p.float32_cases  ? uint32_t(ATTNCHECK_CAP_F32)
                                              : float_formats;
  const uint32_t needs =
      p.needs | (p.backward ? uint32_t(ATTNCHECK_CAP_BACKWARD) : 0u) | (p.layer ? uint32_t(ATTNCHECK_CAP_MHA) : 0u);
  if (!(claimed & formats)) return (formats == float_formats ? "checks one of " : "checks ") + feature_names(formats);
  if (needs & ~claimed) return "needs " + feature_names(needs & ~claimed);
  if (p.needs_one_of && !(claimed & p.needs_one_of)) return "needs one of " + feature_names(p.needs_one_of);
  if (const uint32_t left = p.leaves & domain.restrictions; left)
    return "builds cases outside the kernel's domain (" + restriction_names(left) + ")";
  if (p.widens_heads && domain.only(ATTNCHECK_ONLY_WITHIN_LIMITS) && domain.limits.widths_up_to(1024).size() <= 1)
    return "widens the heads by a dimension, and the kernel takes one head width";
  return "";
}

const std::vector<Property>& all_properties() {
  static const std::vector<Property> sorted = [] {
    std::vector<Property> all = registered();
    std::sort(all.begin(), all.end(), [](const Property& a, const Property& b) {
      return a.order != b.order ? a.order < b.order : std::string(a.name) < b.name;
    });
    return all;
  }();
  return sorted;
}

}  // namespace attncheck
