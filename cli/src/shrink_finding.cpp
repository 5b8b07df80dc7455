// Shrinking: a counterexample made smaller while it fails alike.
#include <algorithm>
#include <optional>

#include "attncheck/case_shrink.hpp"
#include "attncheck/case_text.hpp"
#include "campaign_parts.hpp"

namespace attncheck {
namespace {

// A trial that fails as the counterexample did: the same kind of failure (a property's, or the
// same kind of fault, a raise of the same exception type), and clearly: a largest error/bound of at least 2 (or the found case's,
// if smaller), or a failure of another kind than the bound (a wrong special value, a broken identity: every error/bound under 1),
// so that shrinking never trades a bug shown plainly for a case that barely fails.
bool fails_alike(const Run& run, int kind, double found_ratio, const std::string& raised) {
  return run.failed && run.kind == kind && (run.worst_ratio >= std::min(found_ratio, 2.0) || run.worst_ratio < 1) &&
         raised_type(finding_kind(run.kind, 0, ""), run.finding.message) == raised;
}

}  // namespace

// Makes a counterexample smaller within options.shrink_seconds (a trial under way finishes). A
// drawn case is shrunk as a case (case_shrink.hpp: whole batches, heads, queries, keys and
// columns removed, masks and options cleared, values made plain), each simpler neighbour kept when
// it fails alike; a property that draws no case has its choices shrunk instead. A hang is not
// shrunk: every trial would cost the whole case timeout.
Finding shrink(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding best, int kind,
               double found_ratio, double seconds) {
  if (kind == Outcome::hung) return best;
  const std::string raised = raised_type(finding_kind(kind, 0, ""), best.message);  // an adapter's limit is not a library's raise
  const Clock::time_point start = Clock::now();
  auto in_time = [&] { return !protocol::stop_requested() && since(start) < seconds; };
  struct OutOfTime {};  // ends offer_simpler's walk, whose every neighbour of a large case is a copy of it
  if (!best.case_text.empty()) {
    visit_case_text(best.case_text, [&](auto c) {
      using T = typename decltype(c.q)::value_type;
      while (in_time()) {
        std::optional<Case<T>> simpler;
        auto fails_too = [&](Case<T>&& candidate) {
          if (!in_time()) throw OutOfTime{};
          Finding trial = best;
          trial.case_text = case_to_text(candidate);
          const Run run = run_once(kernel, options, property, 0, nullptr, false, ~0u, &trial);
          if (!fails_alike(run, kind, found_ratio, raised)) return false;
          best = run.finding;
          simpler = std::move(candidate);
          return true;
        };
        bool found = false;
        try {
          found = offer_simpler<T>(c, kernel.capabilities(), fails_too, kernel.domain());
        } catch (const OutOfTime&) {
          break;
        }
        if (!found) break;
        c = std::move(*simpler);
      }
      return 0;
    });
    return best;
  }
  for (bool improved = true; improved && in_time();) {
    improved = false;
    for (size_t at = 0; at < best.choices.size() && in_time(); ++at) {
      const uint64_t now = best.choices[at];
      // A small choice (a kind, a count) tries every smaller value from 0 up, so that it shrinks to
      // the smallest that still fails, not to the first neighbour that passes; a large one (a
      // value, a seed) tries 0, half and one less.
      std::vector<uint64_t> tries;
      if (now <= 64)
        for (uint64_t smaller = 0; smaller < now; ++smaller) tries.push_back(smaller);
      else
        tries = {0, now / 2, now - 1};
      for (uint64_t smaller : tries) {
        if (!in_time()) break;
        std::vector<uint64_t> trial = best.choices;
        trial[at] = smaller;
        const Run run = run_once(kernel, options, property, 0, &trial, best.ladder, best.capabilities);
        if (!fails_alike(run, kind, found_ratio, raised)) continue;
        best = run.finding;
        improved = true;
        break;
      }
    }
  }
  return best;
}

std::string shrunk_shape(const Finding& f) {
  const size_t at = f.case_text.find("\nshape ");
  if (at == std::string::npos) return f.hung ? "not shrunk: it hung" : "its own fixed case";
  return f.case_text.substr(at + 7, f.case_text.find('\n', at + 1) - at - 7) + (f.hung ? " (not shrunk: it hung)" : "");
}

}  // namespace attncheck
