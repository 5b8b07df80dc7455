// A kernel's domain: the problems it takes within what it claims. Real attention code is narrow
// (causal self-attention only, the default scale, dk = dv = D / H, some head widths), so a kernel
// says what it takes beside its capabilities (plugin.h's attncheck_restrictions and
// attncheck_limits_v2, a command's HELO, the Python client's serve(restrictions=, limits=)), the
// case generator draws inside it by construction, and the choke point (require_in_domain) refuses
// a call outside it as attncheck's own error, as it refuses an unclaimed feature. One table: a
// restriction is a row (its bit, its names, the rule it puts on a call), and `attncheck features`,
// the reports, the replay file and the Python client's tables (python/attncheck/_features.py) read
// it. docs/contract.md, "Restrictions".
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "attncheck/features.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// The shapes a kernel takes (attncheck_limits, in the shape vocabulary): each 0 = no limit. Head
// widths (dk and dv) are one of `widths` when it is not empty, else multiples of `width_multiple`
// at most `max_width`.
struct Limits {
  int64_t max_B = 0, max_H = 0, max_Tq = 0, max_Tk = 0;
  int64_t width_multiple = 0, max_width = 0;
  std::vector<int64_t> widths;
  bool operator==(const Limits&) const = default;

  bool any() const { return *this != Limits{}; }
  bool takes_width(int64_t w) const;
  // The widths it takes from 1 to `most`, in order (every one when unlimited).
  std::vector<int64_t> widths_up_to(int64_t most) const;
};

// The limits' numbers by the names the Python client takes them with (serve(limits={...})) and
// reports print, with what each limits; the list of widths is "head_dims".
struct LimitField {
  const char* word;
  int64_t Limits::*field;
  const char* meaning;
};
inline constexpr LimitField kLimitFields[] = {
    {"max_B", &Limits::max_B, "the largest B"},
    {"max_H", &Limits::max_H, "the largest H"},
    {"max_Tq", &Limits::max_Tq, "the largest Tq"},
    {"max_Tk", &Limits::max_Tk, "the largest Tk"},
    {"head_dim_multiple", &Limits::width_multiple, "dk and dv are multiples of it"},
    {"max_head_dim", &Limits::max_width, "dk and dv are at most it"},
};
inline constexpr const char* kHeadDimsWord = "head_dims";  // the widths taken, a list (at most 16)
// The widest head a domain may insist on: a case at least this wide is never drawn.
inline constexpr int64_t kWidestHead = 4096;

// What a kernel takes: its restrictions (ATTNCHECK_ONLY_* bits) and, with ATTNCHECK_ONLY_WITHIN_LIMITS,
// its limits. The default takes every problem its claims allow.
struct Domain {
  uint32_t restrictions = 0;
  Limits limits;
  bool operator==(const Domain&) const = default;

  bool only(uint32_t bit) const { return restrictions & bit; }
  // The causal modes a call may have: none among them unless causal is optional.
  bool causal_optional() const { return !only(ATTNCHECK_ONLY_CAUSAL); }
  // The alignment a causal call it takes has: lower-right, unless it takes upper-left alone.
  Causal causal_alignment() const { return only(ATTNCHECK_ONLY_UPPER_LEFT) ? Causal::upper_left : Causal::lower_right; }
  bool takes(Causal causal) const;
  // Whether every call must be square: ATTNCHECK_ONLY_SQUARE, or causal only with no alignment named.
  bool square() const;
};

// One restriction: its bit, its names, the rule it puts on a call (as `attncheck features` and the
// reports print it), and whether a call keeps it.
struct Restriction {
  uint32_t bit;        // its ATTNCHECK_ONLY_* bit
  const char* c_name;  // "ATTNCHECK_ONLY_CAUSAL"
  const char* word;    // the Python client's, the JSON report's and the replay file's: "causal"
  const char* name;    // what reports call it: "causal only"
  const char* rule;    // "every call causal (with neither alignment named, Tq = Tk)"
  bool (*keeps)(const CallView&, const Domain&);
};

inline constexpr Restriction kRestrictions[] = {
    {ATTNCHECK_ONLY_CAUSAL, "ATTNCHECK_ONLY_CAUSAL", "causal", "causal only",
     "every call causal (with neither alignment named, Tq = Tk)",
     [](const CallView& c, const Domain& d) {
       return c.masks.causal != Causal::none &&
              (d.only(ATTNCHECK_ONLY_LOWER_RIGHT | ATTNCHECK_ONLY_UPPER_LEFT) || c.shape.Tq == c.shape.Tk);
     }},
    {ATTNCHECK_ONLY_LOWER_RIGHT, "ATTNCHECK_ONLY_LOWER_RIGHT", "lower_right", "lower-right causal only",
     "a causal call is lower-right (j <= i + Tk - Tq), never upper-left",
     [](const CallView& c, const Domain&) { return c.masks.causal != Causal::upper_left; }},
    {ATTNCHECK_ONLY_UPPER_LEFT, "ATTNCHECK_ONLY_UPPER_LEFT", "upper_left", "upper-left causal only",
     "a causal call is upper-left (j <= i), never lower-right",
     [](const CallView& c, const Domain&) { return c.masks.causal != Causal::lower_right; }},
    {ATTNCHECK_ONLY_SQUARE, "ATTNCHECK_ONLY_SQUARE", "square", "square only", "Tq = Tk",
     [](const CallView& c, const Domain&) { return c.shape.Tq == c.shape.Tk; }},
    {ATTNCHECK_ONLY_SELF_ATTENTION, "ATTNCHECK_ONLY_SELF_ATTENTION", "self_attention", "self-attention only",
     "a layer's keys and values come from its queries' input (x_kv is x_q)",
     [](const CallView& c, const Domain&) { return !c.layer || c.self_attention; }},
    {ATTNCHECK_ONLY_DEFAULT_SCALE, "ATTNCHECK_ONLY_DEFAULT_SCALE", "default_scale", "default scale only",
     "no explicit scale: 1/sqrt(dk)", [](const CallView& c, const Domain&) { return c.scale == 0; }},
    {ATTNCHECK_ONLY_EQUAL_HEAD_DIMS, "ATTNCHECK_ONLY_EQUAL_HEAD_DIMS", "equal_head_dims", "dk = dv only", "dk = dv",
     [](const CallView& c, const Domain&) { return c.shape.dk == c.shape.dv; }},
    {ATTNCHECK_ONLY_LAYER_HEAD_WIDTH, "ATTNCHECK_ONLY_LAYER_HEAD_WIDTH", "layer_head_width", "layer heads D / H wide only",
     "a layer's dk = dv = D / H, its four biases all or none",
     [](const CallView& c, const Domain&) {
       return !c.layer || (c.shape.dk == c.shape.dv && c.shape.H * c.shape.dk == c.D && (c.biases == 0 || c.biases == 4));
     }},
    {ATTNCHECK_ONLY_WITHIN_LIMITS, "ATTNCHECK_ONLY_WITHIN_LIMITS", "within_limits", "within its limits",
     "B, H, Tq, Tk at most its limits; dk and dv widths it takes",
     [](const CallView& c, const Domain& d) {
       const Limits& l = d.limits;
       auto within = [](int64_t x, int64_t most) { return most == 0 || x <= most; };
       return within(c.shape.B, l.max_B) && within(c.shape.H, l.max_H) && within(c.shape.Tq, l.max_Tq) &&
              within(c.shape.Tk, l.max_Tk) && l.takes_width(c.shape.dk) && l.takes_width(c.shape.dv);
     }},
};

inline std::span<const Restriction> restrictions() { return kRestrictions; }

// Every bit a row defines.
uint32_t all_restrictions();

// The names of the restrictions among `bits`, joined by ", " ("none" for none).
std::string restriction_names(uint32_t bits);

// The domain as reports say it: "causal only, square only, default scale only; limits: head widths
// 64, 128, B <= 4" ("every problem its claims allow" for none).
std::string domain_text(const Domain& domain);
// Its limits alone: "head widths 64, 128; B <= 4" (empty for none).
std::string limits_text(const Limits& limits);

// The restrictions `call` breaks, as bits (0: inside the domain).
uint32_t restrictions_broken(const CallView& call, const Domain& domain);

// A call outside the kernel's domain: the harness's fault, never the kernel's. what() names the
// rules it breaks.
struct OutsideDomain : UnclaimedFeature {
  using UnclaimedFeature::UnclaimedFeature;
};

// The choke point's second half (require_claimed the first): throws OutsideDomain when `call` breaks
// a restriction of `domain`.
void require_in_domain(const CallView& call, const Domain& domain);

// The one choke point every kernel call passes (in process, through the plugin host, through a
// command): require_claimed, then require_in_domain.
inline void require_sendable(const CallView& call, uint32_t capabilities, const Domain& domain) {
  require_claimed(call, capabilities);
  require_in_domain(call, domain);
}

// Empty when a domain a kernel declares can be kept, else a one-line reason: a bit no row has, both
// alignments, a limit below 0, limits that take no head width.
// `capabilities` are the kernel's claims (every one when the caller has none: a replay file's record).
std::string domain_error(const Domain& domain, uint32_t capabilities = ~0u);

// The C struct and back (ABI, protocol): attncheck_limits' fields in the shape vocabulary.
Limits limits_from_abi(const attncheck_limits& l);
attncheck_limits limits_to_abi(const Limits& l);

}  // namespace attncheck
