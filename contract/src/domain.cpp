#include "attncheck/domain.hpp"

#include <algorithm>

namespace attncheck {

bool Limits::takes_width(int64_t w) const {
  if (!widths.empty()) return std::find(widths.begin(), widths.end(), w) != widths.end();
  return (width_multiple <= 1 || w % width_multiple == 0) && (max_width == 0 || w <= max_width);
}

std::vector<int64_t> Limits::widths_up_to(int64_t most) const {
  std::vector<int64_t> taken;
  for (int64_t w = 1; w <= most; ++w)
    if (takes_width(w)) taken.push_back(w);
  return taken;
}

bool Domain::takes(Causal causal) const {
  if (causal == Causal::none) return causal_optional();
  if (only(ATTNCHECK_ONLY_LOWER_RIGHT)) return causal == Causal::lower_right;
  if (only(ATTNCHECK_ONLY_UPPER_LEFT)) return causal == Causal::upper_left;
  return true;
}

bool Domain::square() const {
  return only(ATTNCHECK_ONLY_SQUARE) ||
         (only(ATTNCHECK_ONLY_CAUSAL) && !only(ATTNCHECK_ONLY_LOWER_RIGHT | ATTNCHECK_ONLY_UPPER_LEFT));
}

uint32_t all_restrictions() {
  uint32_t bits = 0;
  for (const Restriction& r : kRestrictions) bits |= r.bit;
  return bits;
}

std::string restriction_names(uint32_t bits) {
  std::string names;
  for (const Restriction& r : kRestrictions)
    if (bits & r.bit) names += (names.empty() ? "" : ", ") + std::string(r.name);
  return names.empty() ? "none" : names;
}

std::string limits_text(const Limits& l) {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (!l.widths.empty()) {
    std::string widths;
    for (int64_t w : l.widths) widths += (widths.empty() ? "" : " ") + std::to_string(w);
    add("head widths " + widths);
  }
  if (l.widths.empty() && l.width_multiple > 1) add("head widths multiples of " + std::to_string(l.width_multiple));
  if (l.widths.empty() && l.max_width > 0) add("head widths <= " + std::to_string(l.max_width));
  for (const auto& [name, most] :
       {std::pair<const char*, int64_t>{"B", l.max_B}, {"H", l.max_H}, {"Tq", l.max_Tq}, {"Tk", l.max_Tk}})
    if (most > 0) add(std::string(name) + " <= " + std::to_string(most));
  return text;
}

std::string domain_text(const Domain& domain) {
  if (domain.restrictions == 0) return "every problem its claims allow";
  std::string text = restriction_names(domain.restrictions & ~uint32_t(ATTNCHECK_ONLY_WITHIN_LIMITS));
  if (text == "none") text.clear();
  if (domain.only(ATTNCHECK_ONLY_CAUSAL) && !domain.only(ATTNCHECK_ONLY_LOWER_RIGHT | ATTNCHECK_ONLY_UPPER_LEFT) &&
      !domain.only(ATTNCHECK_ONLY_SQUARE))
    text += ", square only (causal with neither alignment named)";
  if (domain.only(ATTNCHECK_ONLY_WITHIN_LIMITS))
    text += (text.empty() ? "" : "; ") + std::string("limits: ") + limits_text(domain.limits);
  return text;
}

uint32_t restrictions_broken(const CallView& call, const Domain& domain) {
  uint32_t broken = 0;
  for (const Restriction& r : kRestrictions)
    if (domain.only(r.bit) && !r.keeps(call, domain)) broken |= r.bit;
  return broken;
}

void require_in_domain(const CallView& call, const Domain& domain) {
  const uint32_t broken = restrictions_broken(call, domain);
  if (!broken) return;
  std::string rules;
  for (const Restriction& r : kRestrictions)
    if (broken & r.bit) rules += (rules.empty() ? "" : "; ") + std::string(r.c_name) + ": " + r.rule;
  throw OutsideDomain("a problem outside the kernel's domain (" + rules + ")");
}

std::string domain_error(const Domain& d, uint32_t capabilities) {
  if (const uint32_t unknown = d.restrictions & ~all_restrictions())
    return "restriction bits " + std::to_string(unknown) + " that no ATTNCHECK_ONLY_* row has";
  if (d.only(ATTNCHECK_ONLY_CAUSAL) && !(capabilities & ATTNCHECK_CAP_CAUSAL))
    return "ATTNCHECK_ONLY_CAUSAL without claiming causal masks (ATTNCHECK_CAP_CAUSAL): no call could be sent";
  if (d.only(ATTNCHECK_ONLY_LOWER_RIGHT) && d.only(ATTNCHECK_ONLY_UPPER_LEFT))
    return "both ATTNCHECK_ONLY_LOWER_RIGHT and ATTNCHECK_ONLY_UPPER_LEFT: a causal call has one alignment";
  const Limits& l = d.limits;
  for (int64_t x : {l.max_B, l.max_H, l.max_Tq, l.max_Tk, l.width_multiple, l.max_width})
    if (x < 0) return "a limit below 0 (" + std::to_string(x) + ")";
  for (int64_t w : l.widths)
    if (w < 1) return "a head width below 1 in its list";
  for (int64_t w : l.widths)
    if (w > kWidestHead)
      return "a head width " + std::to_string(w) + " in its list, wider than any attncheck draws (" +
             std::to_string(kWidestHead) + ")";
  if (l.width_multiple > kWidestHead)
    return "head widths multiples of " + std::to_string(l.width_multiple) + ", wider than any attncheck draws (" +
           std::to_string(kWidestHead) + ")";
  if (d.only(ATTNCHECK_ONLY_WITHIN_LIMITS) && l.widths.empty() && l.max_width > 0 && l.width_multiple > l.max_width)
    return "limits that take no head width (multiples of " + std::to_string(l.width_multiple) + " up to " +
           std::to_string(l.max_width) + ")";
  if (!d.only(ATTNCHECK_ONLY_WITHIN_LIMITS) && l.any())
    return "limits without ATTNCHECK_ONLY_WITHIN_LIMITS among its restrictions";
  return "";
}

Limits limits_from_abi(const attncheck_limits& a) {
  Limits l{a.max_batch, a.max_heads, a.max_q_len, a.max_kv_len, a.head_dim_multiple, a.max_head_dim, {}};
  for (int32_t w : a.head_dims)
    if (w == 0)
      break;
    else
      l.widths.push_back(w);
  return l;
}

attncheck_limits limits_to_abi(const Limits& l) {
  attncheck_limits a{};
  a.size = int32_t(sizeof a);
  a.max_batch = int32_t(l.max_B);
  a.max_heads = int32_t(l.max_H);
  a.max_q_len = int32_t(l.max_Tq);
  a.max_kv_len = int32_t(l.max_Tk);
  a.head_dim_multiple = int32_t(l.width_multiple);
  a.max_head_dim = int32_t(l.max_width);
  for (size_t n = 0; n < l.widths.size() && n < std::size(a.head_dims); ++n) a.head_dims[n] = int32_t(l.widths[n]);
  return a;
}

}  // namespace attncheck
