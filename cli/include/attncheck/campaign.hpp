// The campaign behind `attncheck check` and `attncheck mutants`: every property, round after
// round with fresh seeds, against an implementation in a child process, until the budget runs out
// or a counterexample is found; then the counterexample is shrunk and written as a replay file.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "attncheck/compare.hpp"
#include "attncheck/contract.hpp"
#include "attncheck/domain.hpp"

namespace attncheck {

struct CampaignOptions {
  std::string impl = "builtin";  // "builtin" or a plugin's path; with command, a command line
  bool command = false;          // impl is a command speaking the child protocol (--impl-cmd)
  double seconds = 60;           // the search's budget, from the kernel's loading on
  bool keep_going = false;       // on through the budget after a finding, keeping each distinct one
  int64_t max_cases = 0;         // and a count of runs, whichever ends first (0: no count): the same on any machine
  uint64_t seed = 1;
  // The formats to check, ABI v2's ATTNCHECK_CAP_F32 .. ATTNCHECK_CAP_BF16 bits (--dtype): each one
  // the plugin claims too. f32, f16 and bf16 run the float properties, f64 the double one.
  uint32_t formats = ~0u;
  bool backward = true;           // check the backward too, when the plugin claims one (--backward)
  bool require_backward = false;  // and a plugin without one is an error (--backward on)
  Policies policies;              // the conventions it is checked against (policies.hpp); the strict contract by default
  double case_timeout = 30;       // seconds one call may take before it counts as a hang (slow kernels under sanitizers too)
  bool adaptive_timeout = true;   // and less once calls of a problem as large were quick (IsolatedKernel::adapt_timeout)
  double shrink_seconds = 10;     // the budget for making a counterexample small, after the search's
  int jobs = 1;                   // worker processes, each with its own kernel child, sharing the sequence of runs
  // Where the search stands, told after every run (and as shrinking starts): the caller draws it
  // (check's progress line on a terminal), so that the campaign does no terminal I/O of its own.
  struct Progress {
    int64_t cases = 0;
    size_t properties = 0;   // how many different properties have run
    double seconds = 0;      // of the search so far
    bool shrinking = false;  // the run just told failed: shrinking starts
  };
  std::function<void(const Progress&)> progress;  // empty: nobody is told
};

// What a finding's failed call shows (diagnosis.hpp): empty when it has no call the oracle calls
// wrong or that ended in a fault.
struct Diagnosis {
  bool wrong = false;                       // the oracle calls the call's results wrong; `element` is where
  Mismatch element{};                       // the first wrong special value, else the largest error/bound
  int fault = -1;                           // or the call ended in a fault: its Outcome::Kind
  std::string shape;                        // the call's "B 1 H 1 H_kv 1 Tq 1 Tk 2 dk 1 dv 1"
  std::vector<std::string> features;        // the features it uses (the feature table's names, "explicit scale")
  std::vector<std::string> needs;           // those without which it passes: "fails only with"
  bool varies = false;                      // the failed call, run again on the same inputs, was right: its answers vary
  bool poisoned = false;                    // it passes once the inputs no query may see are 0
  bool extreme = false;                     // and they held a NaN, an inf or an extreme (|x| >= 1e4), not ordinary numbers
  std::vector<std::string> accepted_under;  // other policies under which it passes: "--empty-rows nan"
  // Every combination of policies under which it passes: bit n for policy_combination(n)
  // (policies.hpp), for the run's one hint (policy_hint).
  uint32_t accepting = 0;
  std::string cause;  // the known bug class probing the kernel matched, in one sentence (causes.hpp); or empty
  // How the call fails: a fault's kind, or a poisoned, special or plain wrong value in its tensor
  // ("" when there is no call). Two findings that fail alike and need the same features, or share
  // one they need, are taken for one bug (seen_before).
  std::string failure() const;
  bool same_bug(const Diagnosis& other) const;
  explicit operator bool() const { return wrong || fault >= 0; }
};

// A counterexample: the property it breaks, why (the failure report and the case, as a person
// reads them), and how to run it again. `choices` are every answer the property got, the case's
// draw included: they regenerate it through today's generator, and shrinking works on them. A
// kept counterexample (`kept`: a replay file of format 2) holds the case itself instead, as exact
// bits (`case_text`, case_text.hpp; empty when the property draws no case), and `kept_choices`,
// the answers the property got outside the case's draw: it means the same case whatever the
// generator becomes.
struct Finding {
  std::string property, message;
  std::vector<uint64_t> choices;
  bool kept = false;
  std::string case_text;
  std::vector<uint64_t> kept_choices;
  bool ladder = false;          // the run drew from the size ladder (every round but the first): `choices` decode through it
  uint32_t capabilities = ~0u;  // and with these features (ABI v2's bits; a format-1 file: ABI v1's)
  // A property that draws no case (a fixed one): the last case it ran the kernel on, its own, as
  // text, for reports (the mutants table, the HTML heatmaps); replay never reads it.
  std::string last_call_case;
  // The problem the kernel failed on, as text: the call first_wrong_call picks on the finding's run
  // (the last call when a relation between calls broke), which may differ from the drawn case (an
  // emptied row, poisoned keys). The replay file keeps it (`failed-call` lines) for what pastes the
  // counterexample (the Python client's NumPy arrays, `attncheck repro`); replay never reads it.
  // Empty for a hang. With it, why the oracle called it wrong and whether it asked for lse.
  std::string failed_call, failed_call_why;
  bool failed_call_lse = false;
  bool hung = false;      // the call hung: not shrunk (every trial would cost the whole case timeout)
  double ratio = 0;       // the largest error/bound of the finding's run (inf: a wrong special value)
  int64_t found_at = -1;  // its run's place in the campaign's sequence of runs
  // What broke, in words (finding_kind): with the property, what makes a finding distinct.
  std::string kind;
  std::string run_kind;  // what the run that found it showed, before its call was examined
  std::string format;    // the format of its run's last call ("float32"): findings in two formats are two
  Diagnosis diagnosis;
};

// What a finding's heading says of its case: "shrunk", "its own fixed case" when the property
// draws none and made no choice (nothing to shrink), or "not shrunk: it hung".
inline const char* case_note(const Finding& finding) {
  if (finding.hung) return "not shrunk: it hung";
  return finding.case_text.empty() && finding.choices.empty() ? "its own fixed case" : "shrunk";
}

// The shape line of a finding's case ("B 1 H 1 H_kv 1 Tq 1 Tk 2 dk 1 dv 1"), or what it has instead.
std::string shrunk_shape(const Finding& f);

struct CampaignResult {
  bool found = false;
  Finding finding;                                     // the first
  std::vector<Finding> findings;                       // every distinct one (--keep-going), the first first; else that one
  int64_t cases = 0;                                   // property runs
  std::map<std::string, int64_t> per_property;         // runs of each
  std::map<std::string, double> per_property_seconds;  // and their seconds, summed (the search's only)
  double seconds = 0;                                  // searching (the budget, less what the other parts took)
  double shrink_seconds = 0;                           // shrinking the counterexample
  bool replayed = false;                               // a replay file's one run: no search, no shrinking
  double examine_seconds = 0;                          // examining findings: their failed calls, variants and causes
  double start_seconds = 0;                            // starting the kernel (loading it, a command's imports)
  // The whole run: every part of it, which --seconds bounds.
  double total_seconds() const { return start_seconds + seconds + shrink_seconds + examine_seconds; }
  double worst_ratio = 0;  // the largest error/bound seen in any run
  // What a report gives as the largest error/bound: the worst finding's (its shrunk run), else the campaign's.
  double reported_ratio() const {
    double worst = 0;
    for (const Finding& f : findings) worst = std::max(worst, f.ratio);
    return found ? std::max(worst, finding.ratio) : worst_ratio;
  }
  // The kernel calls the search made, and of them those the kernel did not take (NTKN: its library
  // cannot express the problem; each reason's first line, counted); runs of each property a call
  // not taken ended, and runs the budget's end stopped: none of these is a case checked.
  int64_t calls = 0, not_taken = 0, cut_runs = 0;
  std::map<std::string, int64_t> not_taken_reasons, not_taken_runs;
  std::string fp_mode;                                // how the library changed the process's floating-point mode, or empty
  int32_t abi_version = 0;                            // the kernel's plugin ABI (the built-in: 2)
  std::string impl_said;                              // a command's stderr as it started (IsolatedKernel::said_at_start)
  uint32_t capabilities = 0;                          // what it claims, ABI v2's bits: the features the campaign drew from
  Domain domain;                                      // and what it takes of them (domain.hpp)
  std::map<std::string, std::string> not_applicable;  // the properties skipped, and why (not_applicable)
};

// What a campaign checks of what a kernel claims (ABI v2's bits): its claims, less the formats
// options.formats (--dtype) and the backward options.backward (--backward off) leave out.
uint32_t checked_capabilities(uint32_t claimed, const CampaignOptions& options);

// The kernel's claims, split three ways: exercised by the campaign (checked_capabilities); claimed
// but left out (a format --dtype leaves out, the backward under --backward off); not claimed.
struct Coverage {
  uint32_t checked, unchecked, not_claimed;
};
Coverage coverage(uint32_t claimed, const CampaignOptions& options);

// Runs the campaign, in options.jobs worker processes when more than one (workers.cpp), merging
// their findings: the first finding of the sequence, or with keep_going every distinct one. Throws
// std::runtime_error with a one-line reason if the implementation cannot be loaded.
CampaignResult run_campaign(const CampaignOptions& options);

// One worker's share of a campaign: the places worker, worker + jobs, ... of its sequence of runs;
// `first_finding` (shared between the workers' processes, or null) is the earliest place a finding
// was made at, past which no share runs when the first finding ends the campaign.
inline constexpr int kMaxJobs = 256;
struct CampaignShare {
  int worker = 0, jobs = 1;
  std::atomic<int64_t>* first_finding = nullptr;
};
CampaignResult run_campaign_share(const CampaignOptions& options, const CampaignShare& share);

// Whether `found` is one of `earlier` again, in its format, exception type and acceptance by a
// policy (the same property failing the same way, a hang again, or a failed call that fails as an
// earlier one's and needs the same features): --keep-going keeps it out, and the workers' findings
// are merged by it.
bool seen_before(const Finding& found, const std::vector<Finding>& earlier);

// One forward call a property made (replay's `calls`): its case (case_text.hpp's exact bits) and
// the kernel's out [B,H,Tq,dv] and lse [B,H,Tq] (when asked), widened to double (exactly), or the
// fault that ended the call.
struct KernelCall {
  std::string case_text;
  std::vector<double> out, lse;
  std::string fault;  // a crash, hang, refusal...: IsolatedKernel's Outcome detail; empty when it returned
};

// Whether runs of one case made identical calls that answered differently (their outs compared bit
// for bit, any NaN equal to any NaN): the largest difference and where, or empty.
std::string answers_vary(const std::vector<std::vector<KernelCall>>& runs);

// The first of `calls` the oracle calls wrong (its out, then its lse: an element outside the bound
// or a wrong special value) or that ended in a fault, and why ("out[0,0,1,0] outside the bound
// (error/bound 44)", "the kernel crashed ..."); index calls.size() when each call is right (a
// property that fails by comparing calls). What `attncheck repro` writes and the HTML report draws.
struct WrongCall {
  size_t index;
  std::string why;
};
WrongCall first_wrong_call(const std::vector<KernelCall>& calls);

// Runs one property once on a recorded finding (a replay file's: its kept case, or format 1's
// choices); found = it still fails. The result's finding records the case the property got.
// With `calls`, every forward call the property makes is kept there, in order.
CampaignResult replay(const CampaignOptions& options, const Finding& recorded, std::vector<KernelCall>* calls = nullptr);

// A finding as a replay file (replay_file.hpp) and back: into `options` go the file's
// implementation, unless the caller set it (keep_impl), and the policies it was checked under; the
// file records the domain the kernel said it takes (a replay asks the kernel for it again).
// Reading runs nothing; errors are one line (std::runtime_error).
void write_replay(const std::string& path, const CampaignOptions& options, const Finding& finding, const Domain& domain);
Finding read_replay(const std::string& path, CampaignOptions& options, bool keep_impl);

}  // namespace attncheck
