// attncheck features: the feature table (contract/include/attncheck/features.hpp) and the
// restrictions and limits (domain.hpp) as a person reads them, or as the Python client's module
// (--python), with the call schema's slots (call_schema.hpp) too, which python/attncheck/_features.py
// must equal.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/call_scalars.hpp"
#include "attncheck/call_schema.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/commands.hpp"
#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/protocol.hpp"

namespace attncheck {
namespace {

// A Python dict literal of `pairs` (keys and values already written as Python).
std::string dict(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string text = "{";
  for (const auto& [key, value] : pairs) text += (text.size() > 1 ? ", " : "") + key + ": " + value;
  return text + "}";
}
std::string quoted(const std::string& word) { return "\"" + word + "\""; }

// The call schema's slots (call_schema.hpp's kSlots), in wire order: SLOTS, a Python list of dicts, one a line.
std::string slots() {
  // The names of Element's, Role's and CallKind's values, in their order.
  static constexpr const char* kElements[] = {"format", "wide", "f32", "int32", "byte"};
  static constexpr const char* kRoles[] = {"none", "in", "out", "in_if", "out_if", "in_unless"};
  static constexpr const char* kKinds[] = {"forward", "backward", "layer"};
  std::string text =
      "# The call schema (call_slots.def): every tensor a call carries, in wire order (a PROB's inputs, a RSLT's\n"
      "# outputs). name; shape: its dims (B, H, H_kv, Tq, Tk, dk, dv, D); pooled: its dims instead in a paged call\n"
      "# (BS > 0: K's and V's pools of NB blocks of BS keys), [] where it has none; packed: its dims instead in a varlen\n"
      "# call (S > 0, S = B + 1: the sequences packed along Tq and Tk), [] where it has none; element: format (the call's "
      "dtype),\n"
      "# wide (LSE_STORAGE), f32 (float always), int32 or byte; feature: the capability that brings it (its FLAGS bit says it "
      "is\n"
      "# there), None for none; roles: in each kind of call (forward, backward, layer) none, in, out, in_if,\n"
      "# out_if (when the call has its flag, or for a layer slot with a part, that part) or in_unless (not when\n"
      "# the call has its part); part: a layer call's parts bit that brings it (or leaves it out), 0 for none.\n"
      "SLOTS = [\n";
  auto dims = [](const Extent& e) {
    std::string list = "[";
    for (int d = 0; d < e.rank; ++d) list += (d ? ", " : "") + quoted(kDimNames[int(e.dims[d])]);
    return list + "]";
  };
  for (const Slot& s : kSlots) {
    const std::string feature_word = s.feature ? quoted(feature(s.feature).word) : "None";
    std::vector<std::pair<std::string, std::string>> roles;
    for (int k = 0; k < 3; ++k) roles.push_back({quoted(kKinds[k]), quoted(kRoles[int(s.roles[k])])});
    text += "    " +
            dict({{quoted("name"), quoted(s.name)},
                  {quoted("shape"), dims(s.shape)},
                  {quoted("pooled"), dims(s.pooled)},
                  {quoted("packed"), dims(s.packed)},
                  {quoted("element"), quoted(kElements[int(s.element)])},
                  {quoted("feature"), feature_word},
                  {quoted("roles"), dict(roles)},
                  {quoted("part"), std::to_string(s.part)}}) +
            ",\n";
  }
  return text + "]\n";
}

// The PROB's headers (protocol.hpp's kHeaders), in wire order: HEADERS, each with the feature whose
// flag brings it, its size and its fields in order: name, byte offset in it, struct code. A field is
// a dim, a scalar of call_scalars.def (named as its Case member) or one of the protocol's own
// (flags, parts, reserved).
std::string headers() {
  using protocol::Request;
  struct Field {
    std::string name;
    size_t offset;
    char code;
  };
  Request r{};
  std::vector<Field> fields;
  auto add = [&](const std::string& name, const auto& member) {
    using M = std::remove_cvref_t<decltype(member)>;
    static_assert(sizeof(M) == 4 || sizeof(M) == 8, "an int32, uint32, uint64 or double");
    const char code = std::is_floating_point_v<M> ? 'd' : sizeof(M) == 8 ? 'Q' : std::is_signed_v<M> ? 'i' : 'I';
    fields.push_back({name, size_t(reinterpret_cast<const char*>(&member) - reinterpret_cast<const char*>(&r)), code});
  };
  for_each_dim_row([&](Dim d, auto, auto in_request) { add(kDimNames[int(d)], in_request(r)); });
  for_each_scalar_row([&](auto, auto, auto, auto in_request, ScalarRow row) {
    if constexpr (has_member<decltype(in_request), Request>) add(row.name, in_request(r));
  });
  add("flags", r.header.flags);
  add("parts", r.layer.parts);
  add("reserved", r.layer.reserved);
  std::sort(fields.begin(), fields.end(), [](const Field& a, const Field& b) { return a.offset < b.offset; });
  std::string dims = "[",
              text =
                  "# The PROB's headers (protocol.hpp), in wire order: each one's name, the feature whose FLAGS bit brings\n"
                  "# it (None: every PROB has it), its size and its fields in order: name (a dim, a scalar of\n"
                  "# call_scalars.def, or flags, parts, reserved), byte offset in the header, struct code.\n"
                  "HEADERS = [\n";
  for (const char* d : kDimNames) dims += (dims.size() > 1 ? ", " : "") + quoted(d);
  for (const protocol::HeaderRow& h : protocol::kHeaders) {
    std::string flag = "None", list = "[";
    for (const Feature& f : features())
      if (h.flag && f.protocol_flag == h.flag) flag = quoted(f.word);
    for (const Field& f : fields)
      if (f.offset >= h.offset && f.offset < h.offset + h.size)
        list += (list.size() > 1 ? ", " : "") +
                ("[" + quoted(f.name) + ", " + std::to_string(f.offset - h.offset) + ", " + quoted(std::string(1, f.code)) + "]");
    text += "    " +
            dict({{quoted("name"), quoted(h.name)},
                  {quoted("flag"), flag},
                  {quoted("size"), std::to_string(h.size)},
                  {quoted("fields"), list + "]"}}) +
            ",\n";
  }
  return "# The shape vocabulary's dims, in the order of the headers' fields.\nDIMS = " + dims + "]\n" + text + "]\n";
}

std::string python_module() {
  std::vector<std::pair<std::string, std::string>> bits, names, flags, lines, dtypes, storage, lse_storage, causal;
  for (const Feature& f : features()) {
    bits.push_back({quoted(f.word), std::to_string(f.capability)});
    names.push_back({quoted(f.word), quoted(f.name)});
    if (f.protocol_flag) flags.push_back({quoted(f.word), std::to_string(f.protocol_flag)});
    if (!(f.capability & kFormatCapabilities) && *f.text) lines.push_back({quoted(f.word), quoted(f.text)});
  }
  for (const Feature& f : features())
    if (f.capability & kFormatCapabilities) {
      const Format format = Format(std::countr_zero(f.capability));
      dtypes.push_back({std::to_string(int(format)), quoted(f.word)});
      visit_format(format, [&](auto zero) {
        using P = Precision<decltype(zero)>;
        storage.push_back({quoted(f.word), quoted(P::numpy)});
        // The log-sum-exp is float for every format but f64 (plugin.h).
        lse_storage.push_back({quoted(f.word), quoted(format == Format::f64 ? P::numpy : Precision<float>::numpy)});
      });
    }
  for (Causal c : kCausalModes) causal.push_back({std::to_string(int(c)), quoted(causal_name(c))});
  std::vector<std::pair<std::string, std::string>> restriction_bits, restriction_names;
  for (const Restriction& r : restrictions()) {
    restriction_bits.push_back({quoted(r.word), std::to_string(r.bit)});
    restriction_names.push_back({quoted(r.word), quoted(r.name)});
  }
  std::string limits = "[";
  for (const LimitField& l : kLimitFields) limits += (limits.size() > 1 ? ", " : "") + quoted(l.word);
  limits += "]";
  return "\"\"\"The feature table of contract/include/attncheck/features.hpp and the call schema of\n"
         "call_slots.def, for the Python client.\n\n"
         "Written by `attncheck features --python`; ctest (python.FeatureTableIsTheContracts) checks that\n"
         "it is what that prints. Do not edit it by hand.\n\"\"\"\n\n"
         "# ABI v2's capability bits, by the name a served function claims them with.\n"
         "CAPABILITIES = " +
         dict(bits) +
         "\n"
         "# What reports call each.\n"
         "NAMES = " +
         dict(names) +
         "\n"
         "# The PROB header's flag bits.\n"
         "FLAGS = " +
         dict(flags) +
         "\n"
         "# The case text's line (or word) that carries each.\n"
         "LINES = " +
         dict(lines) +
         "\n"
         "# ABI v2's dtype codes, each format's storage in the protocol's bytes, and its log-sum-exp's.\n"
         "DTYPES = " +
         dict(dtypes) +
         "\n"
         "STORAGE = " +
         dict(storage) +
         "\n"
         "LSE_STORAGE = " +
         dict(lse_storage) +
         "\n"
         "# The causal modes' codes.\n"
         "CAUSAL = " +
         dict(causal) +
         "\n"
         "# The restrictions' bits (plugin.h's ATTNCHECK_ONLY_*), by the name serve(restrictions=...) takes, and what reports "
         "call each.\n"
         "RESTRICTIONS = " +
         dict(restriction_bits) +
         "\n"
         "RESTRICTION_NAMES = " +
         dict(restriction_names) +
         "\n"
         "# The limits serve(limits={...}) takes, in attncheck_limits' order, and the list of head widths.\n"
         "LIMITS = " +
         limits +
         "\n"
         "HEAD_DIMS = " +
         quoted(kHeadDimsWord) + "\n" + slots() + headers();
}

// 0 once what was printed has reached standard output; a full disk is an error, not a table that
// was never written (python/attncheck/_features.py is made from it).
int written() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw std::runtime_error("standard output: cannot write (" + std::string(std::strerror(errno)) + ")");
  return 0;
}

int features_table(const FlagValues& o) {
  if (o.on("python")) {
    std::fputs(python_module().c_str(), stdout);
    return written();
  }
  std::printf("%-7s %-26s %-12s %s\n", "bit", "C name", "word", "name");
  for (const Feature& f : features()) std::printf("0x%05x %-26s %-12s %s\n", f.capability, f.c_name, f.word, f.name);
  std::printf("\nrestrictions (attncheck_restrictions; serve(restrictions=[word, ...])): a kernel that takes less says so\n");
  std::printf("%-7s %-31s %-16s %s\n", "bit", "C name", "word", "rule");
  for (const Restriction& r : restrictions()) std::printf("0x%05x %-31s %-16s %s\n", r.bit, r.c_name, r.word, r.rule);
  std::printf("\nlimits (attncheck_limits_v2; serve(limits={word: n, ...})), with ATTNCHECK_ONLY_WITHIN_LIMITS:\n");
  for (const LimitField& l : kLimitFields) std::printf("  %-18s %s\n", l.word, l.meaning);
  std::printf("  %-18s %s\n", kHeadDimsWord, "dk and dv are one of these widths (up to 16 of them)");
  return written();
}

}  // namespace

int features_command(const std::vector<std::string>& args) {
  return Flags("features")
      .boolean("python", "print the Python client's module of the table (python/attncheck/_features.py)")
      .run(args, features_table);
}

}  // namespace attncheck
