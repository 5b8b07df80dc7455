// The features a kernel may claim, one row each: the four formats and every mask, option and
// output beyond plain attention. Each row holds the capability bit (plugin.h) and every name the
// feature goes by, and says whether a call uses it; the reports' "checked / not claimed" lines, the
// harness's refusal of an unclaimed feature (require_claimed), the protocol's flag bits, a shrunk
// case's description and the Python client's tables (python/attncheck/_features.py, written by
// `attncheck features --python yes` and checked against it in ctest) all come from here.
//
// Adding a feature: a row here (a capability bit in plugin.h, a predicate below), and where it is
// drawn (cases.cpp) and honoured (impl/, oracles/). A feature that brings an input tensor adds its
// slot (call_slots.def) and its member in Problem, Case and attncheck_problem_v2, and is carried
// everywhere by the call schema; one that is a scalar is carried by hand (abi.cpp, the case text,
// the PROB header). docs/contract.md, "The call schema", says how.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "attncheck/call_schema.hpp"
#include "attncheck/contract.hpp"
#include "attncheck/plugin.h"
#include "attncheck/precision.hpp"

namespace attncheck {

// The capability bit that claims a format: ATTNCHECK_CAP_F32 .. ATTNCHECK_CAP_BF16.
constexpr uint32_t capability_of(Format format) { return 1u << uint32_t(format); }
static_assert(ATTNCHECK_CAP_F32 == 1u << ATTNCHECK_F32 && ATTNCHECK_CAP_F64 == 1u << ATTNCHECK_F64 &&
              ATTNCHECK_CAP_F16 == 1u << ATTNCHECK_F16 && ATTNCHECK_CAP_BF16 == 1u << ATTNCHECK_BF16);

// The four format bits.
inline constexpr uint32_t kFormatCapabilities = ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16;

// What one kernel call carries, as the feature table reads it: the problem's format, shape, masks
// and options, whether the log-sum-exp is asked, and whether it is the backward (whose lse is an
// input, not asked).
struct CallView {
  Format format = Format::f32;
  Shape shape;
  Masks masks;
  bool bias = false;
  double softcap = 0;
  bool lse = false;
  bool backward = false;
  double dropout_p = 0;
  bool keep = false;           // the dropout keep mask asked for
  bool layer = false;          // a multi-head layer call (attncheck_mha_forward_v2)
  bool layer_weights = false;  // and each head's weights asked
  // What the restrictions read (domain.hpp): the scale (0: the default), and of a layer call its
  // model width, whether x_kv is x_q and how many of its four biases it has.
  double scale = 0;
  int64_t D = 0;
  bool self_attention = false;
  int biases = 0;
  uint32_t inputs = 0;  // the inputs it carries, a bit 1 << slot::Id each (call_schema.hpp)
};

template <class T>
CallView call_view(const Problem<T>& problem, bool lse, bool backward, bool keep = false) {
  CallView call{problem.format,   problem.shape, problem.masks,     problem.bias != nullptr,      problem.softcap,
                lse && !backward, backward,      problem.dropout_p, keep && problem.dropout_p > 0};
  call.scale = problem.scale;
  for_each_problem_input(problem, [&](const Slot& s, const auto* x) {
    if (x) call.inputs |= 1u << index_of(s);
  });
  return call;
}

struct Feature {
  uint32_t capability;     // its ATTNCHECK_CAP_* bit
  const char* c_name;      // "ATTNCHECK_CAP_KV_LENS"
  const char* word;        // the Python client's capability name and the JSON report's: "kv_lens"
  const char* name;        // what reports and a case's description call it: "key lengths"
  const char* text;        // the case text's line (or word of the options line) that carries it; "" for none
  uint32_t protocol_flag;  // the PROB header's flag bit saying it is there; 0 when a field says it
  bool (*used)(const CallView&);
  uint32_t needs = 0;  // the feature it extends, without which no call can use it (the keep mask: dropout)
};

namespace detail {

// A format's row, from its trait (Precision<F>): a new format adds no row here.
template <class F>
constexpr Feature format_row() {
  using P = Precision<F>;
  return {capability_of(P::format), P::capability_name, P::short_name, P::short_name, P::name, 0, [](const CallView& c) {
            return c.format == P::format;
          }};
}

}  // namespace detail

// The table itself (constexpr, so that the protocol's flag bits are read off it at compile time).
inline constexpr Feature kFeatures[] = {
    detail::format_row<float>(),
    detail::format_row<double>(),
    detail::format_row<Half>(),
    detail::format_row<BFloat16>(),
    {ATTNCHECK_CAP_ALLOW, "ATTNCHECK_CAP_ALLOW", "allow", "allow mask", "allow", 1,
     [](const CallView& c) { return c.masks.allow != nullptr; }},
    {ATTNCHECK_CAP_CAUSAL, "ATTNCHECK_CAP_CAUSAL", "causal", "causal", "causal", 0,
     [](const CallView& c) { return c.masks.causal != Causal::none; }},
    {ATTNCHECK_CAP_KV_LENS, "ATTNCHECK_CAP_KV_LENS", "kv_lens", "key lengths", "key-lengths", 2,
     [](const CallView& c) { return c.masks.key_lengths != nullptr; }},
    {ATTNCHECK_CAP_GQA, "ATTNCHECK_CAP_GQA", "gqa", "grouped KV heads", "H_kv", 0,
     [](const CallView& c) { return c.shape.kv_heads() != c.shape.H; }},
    {ATTNCHECK_CAP_WINDOW, "ATTNCHECK_CAP_WINDOW", "window", "window", "window", 0,
     [](const CallView& c) { return c.masks.window_left >= 0 || c.masks.window_right >= 0; }},
    {ATTNCHECK_CAP_SOFTCAP, "ATTNCHECK_CAP_SOFTCAP", "softcap", "soft-cap", "softcap", 0,
     [](const CallView& c) { return c.softcap != 0; }},
    {ATTNCHECK_CAP_BIAS, "ATTNCHECK_CAP_BIAS", "bias", "bias", "bias", 4, [](const CallView& c) { return c.bias; }},
    {ATTNCHECK_CAP_LSE, "ATTNCHECK_CAP_LSE", "lse", "lse", "", 8, [](const CallView& c) { return c.lse; }},
    {ATTNCHECK_CAP_BACKWARD, "ATTNCHECK_CAP_BACKWARD", "backward", "backward", "", 16,
     [](const CallView& c) { return c.backward; }},
    {ATTNCHECK_CAP_DROPOUT, "ATTNCHECK_CAP_DROPOUT", "dropout", "dropout", "dropout", 32,
     [](const CallView& c) { return c.dropout_p > 0; }},
    {ATTNCHECK_CAP_DROPOUT_MASK, "ATTNCHECK_CAP_DROPOUT_MASK", "dropout_mask", "dropout keep mask", "", 64,
     [](const CallView& c) { return c.keep; }, ATTNCHECK_CAP_DROPOUT},
    {ATTNCHECK_CAP_MHA, "ATTNCHECK_CAP_MHA", "mha", "multi-head layer", "", 128, [](const CallView& c) { return c.layer; }},
    {ATTNCHECK_CAP_MHA_WEIGHTS, "ATTNCHECK_CAP_MHA_WEIGHTS", "mha_weights", "layer weights", "", 256,
     [](const CallView& c) { return c.layer_weights; }, ATTNCHECK_CAP_MHA},
    {ATTNCHECK_CAP_SINKS, "ATTNCHECK_CAP_SINKS", "sinks", "sinks", "sinks", 512,
     [](const CallView& c) { return (c.inputs & (1u << slot::SINKS)) != 0; }},
    {ATTNCHECK_CAP_KV_CACHE, "ATTNCHECK_CAP_KV_CACHE", "kv_cache", "KV-end causal", "", 0,
     [](const CallView& c) { return c.masks.causal == Causal::kv_end; }, ATTNCHECK_CAP_CAUSAL},
    {ATTNCHECK_CAP_PAGED_KV, "ATTNCHECK_CAP_PAGED_KV", "paged_kv", "paged KV", "paged", 1024,
     [](const CallView& c) { return c.shape.paged(); }},
    {ATTNCHECK_CAP_VARLEN, "ATTNCHECK_CAP_VARLEN", "varlen", "varlen", "varlen", 2048,
     [](const CallView& c) { return c.shape.varlen; }},
};

// Every feature, formats first (f32, f64, f16, bf16: ABI v2's dtype order), then by capability bit.
inline std::span<const Feature> features() { return kFeatures; }

// Not an ABI bit: set among a kernel's capabilities by the checker (and by the Python client) when
// the kernel exports the multi-head layer alone, without attncheck_forward_v2: only the layer's
// properties then apply. No feature row has it.
inline constexpr uint32_t kLayerOnly = 1u << 31;

// The PROB flag bit of a feature (0: none), at compile time.
constexpr uint32_t protocol_flag(uint32_t capability) {
  for (const Feature& f : kFeatures)
    if (f.capability == capability) return f.protocol_flag;
  return 0;
}

// The row of a capability bit; throws std::logic_error for a bit no row has.
const Feature& feature(uint32_t capability);

// Every bit a row defines.
uint32_t all_capabilities();

// The names of the features among `bits`, in table order, joined by ", " ("none" for none).
std::string feature_names(uint32_t bits);

// The features `call` uses, as capability bits.
uint32_t features_used(const CallView& call);

// A call that uses a feature the kernel does not claim: the harness's fault, never the kernel's
// (a kernel is never sent what it does not claim). what() names the features and their bits.
struct UnclaimedFeature : std::logic_error {
  using std::logic_error::logic_error;
};

// The one line that reports it: "harness error: Property.X sent a problem using ...: a bug of
// attncheck's, not of the kernel".
std::string harness_error(const std::string& property, const UnclaimedFeature& unclaimed);

// The one choke point every kernel call passes (in process, through the plugin host, through a
// command): throws UnclaimedFeature when `call` uses a feature `capabilities` do not claim.
void require_claimed(const CallView& call, uint32_t capabilities);

}  // namespace attncheck
