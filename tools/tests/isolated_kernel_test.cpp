// Isolation: every way a plugin can misbehave at run time is reported, and the checker survives
// to run the next case (the child is restarted).
#include <gtest/gtest.h>

#include "attncheck/isolated_kernel.hpp"
#include "attncheck/printable.hpp"

namespace attncheck {
namespace {

// B 1, H 2, Tq 3, Tk 4, dk 5, dv 6, no masks.
Case<float> small_case() {
  Case<float> c;
  c.shape = {1, 2, 3, 4, 5, 6};
  c.q.assign(2 * 3 * 5, 0.5f);
  c.k.assign(2 * 4 * 5, 0.25f);
  c.v.assign(2 * 4 * 6, 1.0f);
  return c;
}

Outcome run_plugin(const std::string& path, double timeout = 2) {
  IsolatedKernel kernel(path, timeout);
  std::vector<float> out;
  const Outcome first = kernel.run(small_case(), out);
  kernel.run(small_case(), out);  // a second call: the child is restarted, the checker lives on
  return first;
}

std::string plugin(const char* name) { return std::string(BAD_PLUGIN_DIR) + "/bad_" + name + ".so"; }

TEST(Isolation, BuiltinRunsCleanly) {
  IsolatedKernel kernel("builtin", 2);
  std::vector<float> out;
  EXPECT_EQ(kernel.run(small_case(), out).kind, Outcome::ok);
  EXPECT_EQ(out.size(), 36u);
  EXPECT_FLOAT_EQ(out[0], 1.0f);  // every value is 1, so every convex combination is 1
}

// A misbehaviour (a bad plugin's, or a command's mode), the outcome it must give and words of its cause.
struct Misbehaviour {
  const char* name;
  Outcome::Kind kind;
  const char* detail;
};

void expect_reported(const Misbehaviour& e, const Outcome& outcome) {
  EXPECT_EQ(outcome.kind, e.kind) << e.name << ": " << outcome.detail;
  EXPECT_NE(outcome.detail.find(e.detail), std::string::npos) << e.name << ": " << outcome.detail;
}

TEST(Isolation, EachMisbehaviourIsReportedWithItsCause) {
  const Misbehaviour expected[] = {
      {"crash", Outcome::crashed,
       "crashed with SIG"},  // SIGSEGV (a null pointer), or SIGABRT where UBSan sees the null store first
      {"abort", Outcome::crashed, "SIGABRT"},
      {"hang", Outcome::hung, "hung: no answer within 0.5 s of CPU time"},
      {"write_past_end", Outcome::stray_write, "past the end of out"},
      {"write_before_start", Outcome::stray_write, "before the start of out"},
      {"read_past_end", Outcome::crashed, "it touched the guard past the end of k (64 bytes past it)"},
      {"write_far_past_end", Outcome::crashed, "it touched the guard past the end of out (20480 bytes past it)"},
      {"write_far_outside", Outcome::crashed, "it touched memory outside every buffer, at 0x"},
      {"write_into_input", Outcome::crashed, "wrote into the read-only input q"},
      {"refuse", Outcome::refused, "returned 7"},
      {"exit", Outcome::exited, "exited with status 3"},
  };
  for (const Misbehaviour& e : expected) expect_reported(e, run_plugin(plugin(e.name), e.kind == Outcome::hung ? 0.5 : 2));
}

// A command (`check --impl-cmd`) that misbehaves one way: each is an outcome with its cause, and
// the checker lives on (the command is started again for the next call).
TEST(Isolation, EachMisbehaviourOfACommandIsReportedWithItsCause) {
  const Misbehaviour expected[] = {
      {"crash", Outcome::crashed, "crashed with SIGSEGV while computing"},
      {"hang", Outcome::hung, "hung: no answer, and no CPU time used for 0.5 s (blocked) while computing"},
      {"exit", Outcome::exited, "exited with status 3 while computing"},
      {"garbage", Outcome::broke_protocol, "expected RSLT (or FAIL); it sent 'Hello, w"},
      {"wrong_length", Outcome::broke_protocol, "a RSLT frame of 4 bytes (a refusal) or 148 (the status and out)"},
      {"huge_length", Outcome::broke_protocol, "a FAIL frame of at most 65536 bytes"},
      {"half_a_result", Outcome::hung, "hung"},
      {"raise", Outcome::raised, "raised ZeroDivisionError: division by zero"},
      {"refuse", Outcome::refused, "returned 7"},
      {"not_taken", Outcome::not_taken, "Tq 3: this library decodes one query a call"},
      {"forges_mode", Outcome::broke_protocol, "a MODE frame, which only attncheck's plugin host sends"},
      {"forges_stray", Outcome::broke_protocol, "a STRY frame, which only attncheck's plugin host sends"},
      {"forges_fault", Outcome::broke_protocol, "a FALT frame, which only attncheck's plugin host sends"},
      {"zeros", Outcome::ok, ""},
  };
  for (const Misbehaviour& e : expected) {
    IsolatedKernel kernel(std::string(MISBEHAVING_CHILD) + " " + e.name, e.kind == Outcome::hung ? 0.5 : 5, true);
    std::vector<float> out;
    expect_reported(e, kernel.run(small_case(), out));
    if (e.kind == Outcome::raised) {
      EXPECT_NE(kernel.take_stderr().find("Traceback"), std::string::npos) << e.name;
    }
    if (e.kind != Outcome::hung) kernel.run(small_case(), out);  // the checker lives on, the child restarted
  }
}

// A command that stops reading its stdin: the problem (256 KiB of q, more than a pipe holds) cannot
// be sent whole, and the send is bounded by the case's deadline like the answer.
TEST(Isolation, ACommandThatStopsReadingHangsWithinTheDeadline) {
  IsolatedKernel kernel(std::string(MISBEHAVING_CHILD) + " stops_reading", 0.5, true);
  Case<float> c;
  c.shape = {1, 4, 256, 16, 64, 8};
  c.q.assign(size_t(c.shape.q_size()), 0.5f);
  c.k.assign(size_t(c.shape.k_size()), 0.25f);
  c.v.assign(size_t(c.shape.v_size()), 1.0f);
  std::vector<float> out;
  expect_reported(
      {"stops_reading", Outcome::hung, "hung: no answer, and no CPU time used for 0.5 s (blocked) while reading its problem"},
      kernel.run(c, out));
}

TEST(Isolation, ACommandsStderrIsKeptToItsLast8KiBFromAWholeLine) {
  IsolatedKernel kernel(std::string(MISBEHAVING_CHILD) + " chatty", 5, true);
  std::vector<float> out;
  EXPECT_EQ(kernel.run(small_case(), out).kind, Outcome::raised);
  const std::string err = kernel.take_stderr();
  EXPECT_EQ(err.rfind("[... ", 0), 0u) << err.substr(0, 80);
  EXPECT_NE(err.find(" bytes before]\nprogress line "), std::string::npos) << err.substr(0, 80);
  EXPECT_LE(err.size(), 8192u + 40);
  EXPECT_NE(err.find("progress line  999 of the kernel's log\n"), std::string::npos);
  EXPECT_EQ(kernel.take_stderr(), "");  // taken once
}

TEST(Isolation, ACommandThatCannotStartIsAnErrorWithItsStderr) {
  for (const auto& [mode, reason] : {std::pair{"cannot_start", "exited with status 1 while starting"},
                                     std::pair{"garbage_first", "expected HELO (or FAIL); it sent 'Loading "},
                                     std::pair{"old_protocol", "it speaks protocol version 9, this checker 1"},
                                     std::pair{"impossible_domain", "its HELO declares both ATTNCHECK_ONLY_LOWER_RIGHT and"},
                                     std::pair{"hostile_fail", "\\x1b[2J\\x1b[31mcannot start\\x0d\\x0aAAA"}}) {
    IsolatedKernel kernel(std::string(MISBEHAVING_CHILD) + " " + mode, 5, true);
    try {
      kernel.start();
      ADD_FAILURE() << mode << " started";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(reason), std::string::npos) << what;
      if (std::string(mode) == "hostile_fail") {  // escaped and cut: one line, no escape byte
        EXPECT_EQ(what.find('\x1b'), std::string::npos);
        EXPECT_EQ(what.find('\n'), std::string::npos);
        EXPECT_LT(what.size(), 600u);
        EXPECT_NE(what.find("... (65023 bytes)"), std::string::npos) << what;
      }
      if (std::string(mode) == "cannot_start") {
        EXPECT_NE(what.find("ImportError: No module named 'my_kernel'"), std::string::npos) << what;
      }
    }
  }
}

TEST(Isolation, LoadingFaultsAreOneLineErrors) {
  IsolatedKernel missing("/nonexistent/plugin.so", 1);
  try {
    missing.start();
    FAIL() << "a missing plugin loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load plugin"), std::string::npos) << e.what();
  }
}

TEST(Isolation, LoadingThatTurnsOnFlushToZeroIsAFinding) {
  IsolatedKernel kernel(FAST_MATH_LINKED_SO, 2);
  std::vector<float> out;
  EXPECT_EQ(kernel.run(small_case(), out).kind, Outcome::ok);  // the arithmetic itself is fine
  EXPECT_NE(kernel.fp_mode_finding().find("loading the library turned on flush-to-zero and denormals-are-zero"),
            std::string::npos)
      << kernel.fp_mode_finding();
  EXPECT_NE(kernel.fp_mode_finding().find("-Ofast"), std::string::npos) << kernel.fp_mode_finding();
}

TEST(Isolation, ACallThatLeavesTheRoundingModeChangedIsAFinding) {
  IsolatedKernel kernel(plugin("rounding"), 2);
  std::vector<float> out;
  EXPECT_EQ(kernel.fp_mode_finding(), "");
  kernel.run(small_case(), out);
  EXPECT_EQ(kernel.fp_mode_finding(),
            "a call to attncheck_forward_f32 set the rounding mode toward zero (it was to nearest) and left it so for "
            "the whole process");
}

TEST(Isolation, TheBuiltinLeavesTheModeAlone) {
  IsolatedKernel kernel("builtin", 2);
  std::vector<float> out;
  kernel.run(small_case(), out);
  EXPECT_EQ(kernel.fp_mode_finding(), "");
}

// A RSLT whose status contradicts its length is shown as the bytes it came in, the status read
// among them: the dump once left it out (a refusal's status 5 showed as the outputs' zeros).
TEST(Isolation, ABrokenResultShowsTheStatusItSent) {
  const Misbehaviour expected[] = {
      {"refusal_with_outputs", Outcome::broke_protocol,
       "a refusal's RSLT carries the status alone; it sent 'RSLT....................................................."
       "...........' (52 53 4c 54 94 00 00 00 05 00 00 00 00 00"},
      {"success_alone", Outcome::broke_protocol,
       "a RSLT with status 0 carries the outputs; it sent 'RSLT........' (52 53 4c 54 04 00 00 00 00 00 00 00)"},
  };
  for (const Misbehaviour& e : expected) {
    IsolatedKernel kernel(std::string(MISBEHAVING_CHILD) + " " + e.name, 5, true);
    std::vector<float> out;
    expect_reported(e, kernel.run(small_case(), out));
  }
}

// A FAIL's text keeps its UTF-8; the backslash in it is escaped, so that \xff can only be the byte.
TEST(Isolation, AFailTextKeepsItsUtf8) {
  IsolatedKernel kernel(std::string(MISBEHAVING_CHILD) + " utf8_fail", 5, true);
  std::vector<float> out;
  expect_reported({"utf8_fail", Outcome::raised, "raised ValueError: café \\\\ x \\xff"}, kernel.run(small_case(), out));
}

TEST(Printable, KeepsUtf8CharactersAndEscapesEveryOtherByteOneWay) {
  EXPECT_EQ(printable("caf\xc3\xa9 \\ x \xf0\x9f\x98\x80"), "caf\xc3\xa9 \\\\ x \xf0\x9f\x98\x80");
  EXPECT_EQ(printable("\\x41"), "\\\\x41");  // a backslash and x41 as sent, not the escape of A
  for (const auto& [bytes, shown] : {
           std::pair{"\x1b[2J", "\\x1b[2J"},  // an escape sequence
           std::pair{"\xc2\x9b"
                     "2J",
                     "\\xc2\\x9b2J"},                              // the same as a C1 control
           std::pair{"\xc0\xaf", "\\xc0\\xaf"},                    // overlong
           std::pair{"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},           // overlong
           std::pair{"\xed\xa0\x80", "\\xed\\xa0\\x80"},           // a surrogate
           std::pair{"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},  // past U+10FFFF
           std::pair{"caf\xc3", "caf\\xc3"},                       // cut short
           std::pair{"\xa9", "\\xa9"},                             // a continuation alone
           std::pair{"a\xe2\x80\xa8"
                     "b",
                     "a\\xe2\\x80\\xa8b"},  // a line separator
           std::pair{"a\xe2\x80\xae"
                     "b",
                     "a\\xe2\\x80\\xaeb"},  // right-to-left override
       })
    EXPECT_EQ(printable(bytes), shown);
  EXPECT_EQ(printable("a\xc3\xa9", 2), "a... (3 bytes)");  // cut before a character, not inside it
  EXPECT_EQ(printable("a\xc3\xa9", 3), "a\xc3\xa9");
  EXPECT_EQ(printable("a\nb\tc\r", 40, true), "a\nb\tc\\x0d");
}

// Text printable() made, passed on (a replay file's why, a FAIL text cut shorter): escaped once.
TEST(Printable, ReprintableEscapesOnce) {
  const std::string once = printable("caf\xc3\xa9 \\ x \xff\x1b", 400);
  EXPECT_EQ(reprintable(once, 400), once);
  EXPECT_EQ(reprintable("a\\b \\x4 \\xFF\n\xff", 400), "a\\\\b \\\\x4 \\\\xFF\\x0a\\xff");  // not its escapes: escaped
  EXPECT_EQ(reprintable("ab\\xff", 4), "ab... (6 bytes)");                                  // cut before an escape, not inside it
}

TEST(Printable, PythonLiteralHoldsAnyBytes) {
  EXPECT_EQ(python_literal("say \"hi\" \\ \xc3\xa9\n\x7f\xc2\x85\xff\xe2\x80\xae\xf0\x9f\x98\x80"),
            "\"say \\\"hi\\\" \\\\ \xc3\xa9\\x0a\\x7f\\x85\\udcff\\u202e\xf0\x9f\x98\x80\"");
}

}  // namespace
}  // namespace attncheck
