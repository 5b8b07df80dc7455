// The registry of properties, filled by ATTNCHECK_PROPERTY in the files that write them.
#include <algorithm>
#include <string>

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
