// What the campaign's source files share, and nothing outside cli/src uses (the public interface is
// attncheck/campaign.hpp). Each function's comment is at its definition, in the file named here.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/campaign.hpp"
#include "attncheck/causes.hpp"
#include "attncheck/diagnosis.hpp"
#include "attncheck/isolated_kernel.hpp"
#include "attncheck/property.hpp"

namespace attncheck {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// campaign_checker.cpp: a property run against the kernel in its child process.

// One run of `property`: the failure, if any, with the choices that led to it; or, neither passed
// nor failed, a call not taken (its reason) or the budget's end.
struct Run {
  bool failed = false;
  int kind = -1;  // as Failed::kind (campaign_checker.cpp)
  Finding finding;
  double worst_ratio = 0;
  bool not_taken = false, out_of_budget = false;
  std::string not_taken_reason;
  std::string traits;  // of the drawn case, when it failed (policy_traits)
  int64_t calls = 0, calls_not_taken = 0;
  bool judged() const { return !not_taken && !out_of_budget; }
};
Run run_once(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, uint64_t seed,
             const std::vector<uint64_t>* recorded, bool ladder, uint32_t capabilities = ~0u, const Finding* kept = nullptr,
             bool with_text = false, std::vector<KernelCall>* calls = nullptr);

// distinct_findings.cpp: what broke, in words, and what makes two findings one.
std::string finding_kind(int kind, double ratio, const std::string& message, const Diagnosis& d = {});
std::string raised_type(const std::string& kind, const std::string& message);
std::string run_key(const Run& run);

// shrink_finding.cpp: a counterexample made smaller.
Finding shrink(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding best, int kind,
               double found_ratio, double seconds);

// examine_finding.cpp: a finding's failed call, what it shows and its cause.
void examine(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding& f, int fault,
             CauseCache& causes);

}  // namespace attncheck
