// fuzz_replay checks the replay file reader (tools/, parse_replay) on any bytes: a file is data
// people keep and share, so it returns a replay or throws std::runtime_error whose message is one
// line of printable text starting with the input's name; never a crash, a hang, another exception
// or an allocation beyond the input's size. A replay it returns reads back to itself from its text
// (replay_text): what `check` writes is what `check --replay` reads.
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

#include "attncheck/printable.hpp"
#include "attncheck/replay_file.hpp"
#include "fuzz_input.hpp"

namespace {

void check_error(const std::string& message) {
  if (attncheck::fuzz::showing()) std::fprintf(stderr, "%s\n", message.c_str());
  // Printable: what reprintable() leaves as it is (ASCII and UTF-8 characters, escapes made once).
  const bool printable = attncheck::reprintable(message, message.size()) == message;
  if (message.rfind("input: ", 0) != 0 || !printable)
    attncheck::fuzz::finding("parse_replay's error is not one printable line naming the input: " + message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attncheck;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  ReplayFile replay;
  try {
    replay = parse_replay(in, "input");
  } catch (const std::runtime_error& e) {
    check_error(e.what());
    return 0;
  }
  if (fuzz::showing())
    std::fprintf(stderr, "input: format %d, property %s, %zu choices%s\n", replay.format, replay.property.c_str(),
                 replay.choices.size(), replay.case_text.empty() ? "" : ", a case");
  std::istringstream again(replay_text(replay));
  try {
    if (!(parse_replay(again, "input") == replay)) fuzz::finding("a replay read from its own text differs from it");
  } catch (const std::runtime_error& e) {
    fuzz::finding(std::string("a replay's own text does not read back: ") + e.what());
  }
  return 0;
}
