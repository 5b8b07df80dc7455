// Kept regressions (corpus/regressions/check/*.replay, format 2) replay the identical case whatever
// order the generator draws in. This test is built twice: over the generator as it is, and over
// one that fills v before k and q (ATTNCHECK_GENERATOR_REORDERED, cli/tests/CMakeLists.txt). Each
// kept regression must still fail on the kernel it was found on, pass on the built-in
// implementation, and hand its property the case it holds, bit for bit. A format-1 file
// (format1/, the generator's choices alone) is the control: it still loads, and it replays its
// format-2 twin's case over the generator it was made with, and another case over the reordered one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "attncheck/campaign.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/replay_file.hpp"

namespace attncheck {
namespace {

namespace fs = std::filesystem;

// A kept regression names its kernel by file name; the build's copy of it, or "" if not built.
std::string plugin_path(const std::string& name) {
  for (const char* dir : {PLUGIN_DIR, THIRD_PARTY_DIR})
    if (fs::exists(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  return "";
}

std::vector<fs::path> kept(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".replay") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

CampaignResult replay_file(const fs::path& file, const std::string& impl = "") {
  CampaignOptions options;
  const Finding finding = read_replay(file.string(), options, false);
  options.impl = impl.empty() ? plugin_path(options.impl) : impl;
  return replay(options, finding);
}

TEST(KeptRegressions, ReplayTheIdenticalCaseStillFailingOnTheirKernel) {
  int replayed = 0;
  for (const fs::path& file : kept(REGRESSIONS_DIR)) {
    CampaignOptions options;
    const Finding finding = read_replay(file.string(), options, false);
    ASSERT_TRUE(finding.kept) << file << " is not format 2";
    // Only a third-party plugin may be missing (its Debian package absent); a planted bug never.
    if (plugin_path(options.impl).empty()) {
      ASSERT_NE(options.impl.rfind("mutant_", 0), 0u) << file << ": " << options.impl << " not found (impl names a file)";
      std::printf("%s: %s is not built here; skipped\n", file.c_str(), options.impl.c_str());
      continue;
    }
    ++replayed;
    const CampaignResult on_kernel = replay_file(file);
    EXPECT_TRUE(on_kernel.found) << file << " no longer fails on " << options.impl;
    EXPECT_EQ(on_kernel.finding.case_text, finding.case_text) << file;
    const CampaignResult on_builtin = replay_file(file, "builtin");
    EXPECT_FALSE(on_builtin.found) << file << " fails on the built-in implementation:\n" << on_builtin.finding.message;
    EXPECT_EQ(on_builtin.finding.case_text, finding.case_text) << file;
  }
  EXPECT_GE(replayed, 4);
}

// A property that changes its case before the call it judges (forbidden keys poisoned) keeps the
// problem the kernel failed on beside the drawn case, and the replay file carries it: what the
// Python client pastes as NumPy arrays.
TEST(KeptRegressions, AFindingKeepsTheProblemTheKernelFailedOn) {
  const fs::path file = fs::path(REGRESSIONS_DIR) / "mutant_multiply_forbidden_values.replay";
  const CampaignResult on_kernel = replay_file(file);
  ASSERT_TRUE(on_kernel.found);
  const Finding& finding = on_kernel.finding;
  ASSERT_EQ(finding.property, "ForbiddenKeysAndValuesCannotChangeValidOutputs");
  const auto finite = [](const std::string& text) {
    std::istringstream in(text);
    std::string first;
    std::getline(in, first);
    const Case<float> c = case_from_text<float>(first, in);
    return std::all_of(c.v.begin(), c.v.end(), [](float x) { return std::isfinite(x); }) &&
           std::all_of(c.k.begin(), c.k.end(), [](float x) { return std::isfinite(x); });
  };
  EXPECT_TRUE(finite(finding.case_text)) << finding.case_text;
  EXPECT_FALSE(finite(finding.failed_call)) << "the failed call is not the poisoned one:\n" << finding.failed_call;
  const fs::path written = fs::temp_directory_path() / "attncheck_failed_call.replay";
  CampaignOptions options;
  write_replay(written.string(), options, finding, Domain{});
  EXPECT_EQ(read_replay(written.string(), options, false).failed_call, finding.failed_call);
  fs::remove(written);
}

// The kernel's domain when it was found is kept: its restrictions' words and its limits read back
// as written; a word no restriction has, or limits without their restriction, is a one-line error.
TEST(KeptRegressions, AFindingKeepsTheDomainItWasFoundIn) {
  const fs::path file = fs::path(REGRESSIONS_DIR) / "mutant_multiply_forbidden_values.replay";
  const CampaignResult on_kernel = replay_file(file);
  ASSERT_TRUE(on_kernel.found);
  Domain domain{ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_DEFAULT_SCALE | ATTNCHECK_ONLY_WITHIN_LIMITS, {}};
  domain.limits.max_Tk = 512;
  domain.limits.widths = {32, 64};
  const fs::path written = fs::temp_directory_path() / "attncheck_domain.replay";
  CampaignOptions options;
  write_replay(written.string(), options, on_kernel.finding, domain);
  const std::string text = replay_text(read_replay_file(written.string()));
  EXPECT_NE(text.find("\nrestrictions causal default_scale within_limits\nlimits max_Tk 512 head_dims 32,64\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(read_replay_file(written.string()).domain, domain);
  for (const auto& [from, to, says] : {std::tuple{"restrictions causal", "restrictions causal sideways", "no restriction"},
                                       std::tuple{"restrictions causal default_scale within_limits\n", "", "without"}}) {
    std::string damaged = text;
    damaged.replace(damaged.find(from), std::string(from).size(), to);
    std::istringstream in(damaged);
    try {
      parse_replay(in, "damaged");
      ADD_FAILURE() << "read without an error:\n" << damaged;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  fs::remove(written);
}

TEST(KeptRegressions, AFormat1FileMeansWhatTheGeneratorMakesOfIt) {
  for (const fs::path& old : kept(fs::path(REGRESSIONS_DIR) / "format1")) {
    const fs::path twin = old.parent_path().parent_path() / old.filename();
    const CampaignResult by_choices = replay_file(old), by_case = replay_file(twin);
    EXPECT_TRUE(by_case.found) << twin;
#ifdef ATTNCHECK_GENERATOR_REORDERED
    EXPECT_NE(by_choices.finding.case_text, by_case.finding.case_text) << old << ": the reordering changed nothing";
#else
    EXPECT_TRUE(by_choices.found) << old;
    EXPECT_EQ(by_choices.finding.case_text, by_case.finding.case_text) << old;
#endif
  }
}

}  // namespace
}  // namespace attncheck
