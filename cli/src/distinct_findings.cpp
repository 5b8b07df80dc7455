// What broke in a finding, in words, and what makes two findings one.
#include <limits>

#include "campaign_parts.hpp"

namespace attncheck {

// What broke, in words: an implementation fault's kind; else what the failed call shows (a poisoned
// input no query may see changed it, a wrong special value, a wrong value); else how the property
// failed (error/bound inf: a wrong special value; beyond the bound: a wrong value; the precision
// gate: imprecise; else a relation between calls or an identity).
std::string finding_kind(int kind, double ratio, const std::string& message, const Diagnosis& d) {
  switch (kind) {
    case Outcome::refused:
      return "refused";
    case Outcome::crashed:
      return "crashed";
    case Outcome::hung:
      return "hung";
    case Outcome::exited:
      return "exited";
    case Outcome::stray_write:
      return "wrote outside its output";
    case Outcome::raised:
      return "raised";
    case Outcome::broke_protocol:
      return "broke the protocol";
    default:
      break;
  }
  if (d.varies || message.rfind("answers vary between identical calls", 0) == 0) return "answers vary";
  if (d.wrong && d.poisoned) return d.extreme ? "changed by a poisoned forbidden input" : "changed by a forbidden input";
  if (d.wrong) return d.element.special() ? "wrong special value" : "wrong value";
  if (!(ratio < std::numeric_limits<double>::infinity())) return "wrong special value";
  if (ratio >= 1) return "wrong value";
  return message.find("imprecise: ") != std::string::npos ? "imprecise" : "broke a relation";
}

namespace {

// Whether a finding's kind is a fault of the call (it refused, crashed, hung, raised...), not a wrong result.
bool fault_kind(const std::string& kind) {
  for (int k = Outcome::refused; k <= Outcome::broke_protocol; ++k)
    if (kind == finding_kind(k, 0, "")) return true;
  return false;
}

}  // namespace

// What a raised finding raised, "NotExpressible" or "TypeError" (the word after "raised " in its
// message); empty for other kinds. An adapter's limit and a library's exception are two findings.
std::string raised_type(const std::string& kind, const std::string& message) {
  const size_t at = kind == "raised" ? message.find("raised ") : std::string::npos;
  if (at == std::string::npos) return "";
  const size_t start = at + 7, end = message.find_first_of(": \n", start);
  return message.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Whether `found` is an earlier finding again. Findings in two formats, of two exception types a
// raise named, or one a policy accepts and one none does (a convention, and a bug beside it), are
// never one. Within that: the same property failing the same way; a hang again (whose call is not
// run twice); a failed call that fails as an earlier finding's does and needs the same features or
// shares one it needs (Diagnosis::same_bug: one bug seen through many properties); one fault of the
// layer through each layer property (whose calls have no case text to diagnose). Never a shared cause
// alone: a probe's sentence says what the kernel does, not which finding it explains. A heuristic
// (docs/checking.md): a second bug whose calls fail exactly as the first's is said once the first
// is fixed.
bool seen_before(const Finding& found, const std::vector<Finding>& earlier) {
  const auto layer = [](const Finding& f) { return f.property.rfind("Layer", 0) == 0; };
  for (const Finding& f : earlier) {
    if (f.format != found.format || raised_type(f.kind, f.message) != raised_type(found.kind, found.message) ||
        (f.diagnosis.accepting != 0) != (found.diagnosis.accepting != 0))
      continue;
    if ((f.kind == found.kind && (f.property == found.property || f.hung)) || found.diagnosis.same_bug(f.diagnosis) ||
        (f.kind == found.kind && fault_kind(f.kind) && layer(f) && layer(found)))
      return true;
  }
  return false;
}

// What tells failed runs apart before any call is run again: the property, what broke, the
// format, the exception type a raise named, and what the drawn case holds that a policy relaxes
// (policy_traits: an empty row, a NaN or inf where no query looks).
std::string run_key(const Run& run) {
  const Finding& f = run.finding;
  const std::string kind = finding_kind(run.kind, run.worst_ratio, f.message);
  return f.property + "|" + kind + "|" + f.format + "|" + raised_type(kind, f.message) + "|" + run.traits;
}

}  // namespace attncheck
