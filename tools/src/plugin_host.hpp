// The plugin host: the child, forked from the checker, that loads a plugin and speaks the protocol.
#pragma once

#include <string>

namespace attncheck {

// Loads plugin `which`, answers HELO (or FAIL) on `answers`, then runs each call read from `requests`
// against guard pages and answers it, until the checker closes `requests`; never returns.
[[noreturn]] void host_plugin(const std::string& which, int requests, int answers);

}  // namespace attncheck
