// The implementation a subcommand runs, as its command line names it (--impl PATH or --impl-cmd
// COMMAND), and the rule for one a replay file names: a file is data, so what it names is run only
// when the user names it too (--impl, --impl-cmd) or says to trust it (--trust-replay yes).
#pragma once

#include <string>

#include "attncheck/campaign.hpp"
#include "attncheck/flags.hpp"

namespace attncheck {

// Declares --impl, --impl-cmd and --trust-replay.
Flags& implementation_flags(Flags& flags);
// Sets options.impl and options.command from the flags; false when neither was given (options
// keep the built-in). Throws a one-line error for both, or for a newline, which would split the replay
// file's line and name another implementation.
bool named_implementation(const FlagValues& given, CampaignOptions& options);
// Throws unless the implementation a replay file named (now in `options`) may run: --trust-replay yes.
void require_trusted(const FlagValues& given, const std::string& replay, const CampaignOptions& options);

}  // namespace attncheck
