// The report of `attncheck check --html FILE`: one self-contained HTML file a person reads at a
// glance, with no script and nothing fetched. For a finding: heatmaps of the failing slice as D2L's
// show_heatmaps draws attention (queries down, keys across, a color bar): the permitted keys, the
// exact weights, and the kernel's error/bound per output element; the shrunk case's tensors, the
// replay command and the campaign's per-property counts. For a pass: the verdict, the counts and
// what was checked.
#pragma once

#include <string>
#include <vector>

#include "attncheck/campaign.hpp"
#include "attncheck/finding_view.hpp"

namespace attncheck {

// The lines `attncheck check` prints, shown in the report as printed.
struct ReportText {
  std::string verdict;               // "PASS", "FAIL", or the floating-point mode's
  std::string summary;               // the summary line
  std::string checked;               // "checked: ...; not claimed: ..."
  std::vector<std::string> replays;  // the command that replays each finding
};

// Writes the report of `result` to `path`, each finding drawn from its view in `views`
// (finding_views(options, result), finding_view.hpp: what runs the kernel and the oracle; this
// only renders). Throws std::runtime_error with a one-line reason when the file cannot be written.
void write_html_report(const std::string& path, const CampaignOptions& options, const CampaignResult& result,
                       const std::vector<FindingView>& views, const ReportText& text);

// `text` ready for XML or HTML: & < > " ' escaped, and what XML 1.0 cannot hold (control characters
// other than tab, newline and return, bytes that are not UTF-8) replaced by U+FFFD, so that a report carrying a
// command's stderr still parses.
std::string markup_escaped(const std::string& text);

}  // namespace attncheck
