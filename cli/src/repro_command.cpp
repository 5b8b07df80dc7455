// attncheck repro: a replay file's finding as a standalone regression test. The property runs once
// more (on the kept case, or its own fixed ones), every kernel call kept; the first call whose output the oracle calls
// wrong (or that crashed, hung, refused) is written down with its tensors as exact literals, the
// oracle's exact outputs and the bound of any correct kernel: a GoogleTest file that loads a plugin
// (--impl), or a pytest file that runs a command the user names through the Python client; for an
// adapter's finding, with --standalone yes, a script of the library alone (standalone_repro.cpp).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/call_scalars.hpp"
#include "attncheck/campaign.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/commands.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/features.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/implementation.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/source_text.hpp"
#include "attncheck/standalone_repro.hpp"

namespace attncheck {
namespace {

const char* storage(Format f) { return f == Format::f64 ? "double" : f == Format::f32 ? "float" : "uint16_t"; }

// A C++ type of a slot's elements in a call in `format`.
const char* element_type(const Slot& s, Format format) {
  return s.element == Element::byte ? "uint8_t" : s.element == Element::int32 ? "int32_t" : storage(stored_format(s, format));
}

// The arrays of a GoogleTest repro: the case's inputs and the oracle's out (and lse), into t.
template <class T>
void gtest_data(std::ostream& t, const Case<T>& c, const Reference& ref, bool with_lse) {
  for_each_case_input(c, [&](const Slot& s, const auto& x) {
    if (!x.empty())
      t << "const " << element_type(s, c.format) << " " << s.name << "[] = {" << c_values(s, x, c.format) << "};  // " << axes(s)
        << "\n";
  });
  t << "const double exact_hi[] = {" << exact_hi(ref.out, false) << "};  // out [B,H,Tq,dv]\n"
    << "const double exact_lo[] = {" << exact_lo(ref.out, false) << "};\n"
    << "const double bound[] = {" << bounds(ref.out, false) << "};\n";
  if (with_lse)
    t << "const double lse_exact_hi[] = {" << exact_hi(ref.lse, false) << "};  // lse [B,H,Tq]\n"
      << "const double lse_exact_lo[] = {" << exact_lo(ref.lse, false) << "};\n"
      << "const double lse_bound[] = {" << bounds(ref.lse, false) << "};\n";
  t << "\n";
}

// The repro's helpers: widen (the format to float or double) and attncheck's comparison rule.
void gtest_helpers(std::ostream& t, Format format) {
  const char* e = storage(format);
  if (format == Format::bf16)
    t << "float widen(uint16_t bits) {\n  const uint32_t wide = uint32_t(bits) << 16;\n  float x;\n"
      << "  std::memcpy(&x, &wide, 4);\n  return x;\n}\n\n";
  if (format == Format::f16)
    t << "float widen(uint16_t bits) {  // IEEE binary16 to float, exactly\n"
      << "  const int exponent = (bits >> 10) & 31, mantissa = bits & 1023;\n"
      << "  const float magnitude = exponent == 31 ? (mantissa ? NAN : INFINITY)\n"
      << "                          : exponent == 0 ? std::ldexp(float(mantissa), -24)\n"
      << "                                          : std::ldexp(float(mantissa | 1024), exponent - 25);\n"
      << "  return bits & 0x8000 ? -magnitude : magnitude;\n}\n\n";
  if (!is_narrow(format)) t << "double widen(" << e << " x) { return x; }\n\n";
  t << "// attncheck's rule (its compare.hpp, within_bound): a bound of +inf is not checked; an exact NaN\n"
    << "// needs NaN; an exact infinity needs that infinity or NaN; else finite and within the bound.\n"
    << "bool within(long double x, long double exact, double bound) {\n"
    << "  if (std::isinf(bound)) return true;\n  if (std::isnan(exact)) return std::isnan(x);\n"
    << "  if (std::isinf(exact)) return x == exact || std::isnan(x);\n"
    << "  return std::isfinite(x) && std::fabs(x - exact) <= bound;\n}\n\n}  // namespace\n\n";
}

// A scalar of the case as a C++ literal: a double exactly, an enumeration's code with its name.
std::string c_literal(double x) { return hex(x); }
template <class I>
requires std::is_integral_v<I> std::string c_literal(I n) { return std::to_string(n) + (std::is_unsigned_v<I> ? "u" : ""); }
std::string c_literal(Format f) { return std::to_string(int(f)) + " /* " + format_name(f) + " */"; }
std::string c_literal(Causal c) { return std::to_string(int(c)) + " /* " + causal_name(c) + " */"; }

// The lines that fill ABI v2's problem p with case c's dims, scalars and inputs: each row's member
// (call_scalars.def, call_slots.def) that attncheck_problem_v2 has.
template <class T>
std::string abi_fill(const Case<T>& c) {
  std::string lines;
  const Dims d = dims_of(c.shape);
  for_each_dim_row([&](Dim dim, auto in_abi, auto) {
    if constexpr (has_member<decltype(in_abi), attncheck_problem_v2>)
      lines += "  p." + std::string(abi_member(dim)) + " = " + std::to_string(d[dim]) + ";\n";
  });
  for_each_scalar_row([&](auto, auto in_case, auto in_abi, auto, ScalarRow row) {
    if constexpr (has_member<decltype(in_abi), attncheck_problem_v2> && has_member<decltype(in_case), const Case<T>>)
      lines += "  p." + std::string(row.abi_member) + " = " + c_literal(in_case(c)) + ";\n";
  });
  for_each_case_input(c, [&](const Slot& s, const auto& x) {
    if (!x.empty()) lines += "  p." + std::string(s.abi.member) + " = " + s.name + ";\n";
  });
  return lines;
}

// The repro's test: the plugin loaded, the case's problem filled in, out (and lse) judged.
template <class T>
void gtest_test(std::ostream& t, const CampaignOptions& o, const Finding& f, const Case<T>& c, bool with_lse) {
  const Shape& s = c.shape;
  const char* e = storage(c.format);
  t << "TEST(AttncheckRegression, " << f.property << ") {\n"
    << "  const char* path = std::getenv(\"ATTNCHECK_REPRO_PLUGIN\");\n"
    << "  void* plugin = dlopen(path ? path : " << string_literal(o.impl, false) << ", RTLD_NOW | RTLD_LOCAL);\n"
    << "  ASSERT_NE(plugin, nullptr) << dlerror();\n"
    << "  auto forward = reinterpret_cast<int32_t (*)(const attncheck_problem_v2*)>(dlsym(plugin, \"attncheck_forward_v2\"));\n"
    << "  ASSERT_NE(forward, nullptr) << \"not an ABI v2 plugin: no attncheck_forward_v2\";\n"
    << "  std::vector<" << e << "> out(" << s.out_size() << ");\n"
    << "  attncheck_problem_v2 p{};\n  p.size = int32_t(sizeof p);\n"
    << abi_fill(c) << "  p.out = out.data();\n"
    << (with_lse ? std::string("  std::vector<") + (c.format == Format::f64 ? "double" : "float") + "> lse(" +
                       std::to_string(s.lse_size()) + ");\n  p.lse = lse.data();\n"
                 : "")
    << "  ASSERT_EQ(forward(&p), 0) << \"the kernel refused the problem\";\n"
    << "  for (size_t n = 0; n < out.size(); ++n) {\n"
    << "    const long double exact = (long double)exact_hi[n] + exact_lo[n];\n"
    << "    EXPECT_TRUE(within(widen(out[n]), exact, bound[n]))\n"
    << "        << \"out element \" << n << \" (row-major [B,H,Tq,dv]): \" << widen(out[n]) << \", exact \" << double(exact)\n"
    << "        << \", bound \" << bound[n];\n  }\n";
  if (with_lse)
    t << "  for (size_t n = 0; n < lse.size(); ++n) {  // an exact infinity needs that infinity in lse\n"
      << "    const long double exact = (long double)lse_exact_hi[n] + lse_exact_lo[n];\n"
      << "    EXPECT_TRUE(std::isinf(exact) && !std::isinf(lse_bound[n]) ? lse[n] == exact : within(lse[n], exact, "
         "lse_bound[n]))\n"
      << "        << \"lse element \" << n << \" (row-major [B,H,Tq]): \" << lse[n] << \", exact \" << double(exact)\n"
      << "        << \", bound \" << lse_bound[n];\n  }\n";
  t << "}\n";
}

// In both kinds of file `why` is a report's text, escaped where it came in (printable): reprintable()
// keeps it one line without escaping its escapes again.
template <class T>
std::string gtest_file(const std::string& replay, const CampaignOptions& o, const Finding& f, const Case<T>& c,
                       const Reference& ref, bool with_lse, const std::string& why) {
  const Shape& s = c.shape;
  std::ostringstream t;
  t << "// A regression test written by `attncheck repro --replay " << comment(replay) << "` (attncheck-repro 1):\n"
    << "// Property." << f.property << " on " << comment(o.impl) << ": " << reprintable(why, 400) << ".\n"
    << "// The case is the call the oracle found wrong; `exact` is the oracle's out (hi + lo), `bound` the\n"
    << "// largest error of any correct kernel. Build: c++ -std=c++17 THIS.cpp -I attncheck/contract/include\n"
    << "// -lgtest -lgtest_main -ldl -pthread; run with ATTNCHECK_REPRO_PLUGIN=path/to/plugin.so.\n"
    << "#include <dlfcn.h>\n#include <gtest/gtest.h>\n\n#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n"
    << "#include <cstring>\n#include <vector>\n\n#include \"attncheck/plugin.h\"\n\nnamespace {\n\n"
    << "// B " << s.B << ", H " << s.H << ", H_kv " << s.kv_heads() << ", Tq " << s.Tq << ", Tk " << s.Tk << ", dk " << s.dk
    << ", dv " << s.dv << "; " << format_name(c.format) << (is_narrow(c.format) ? " (bit patterns)" : "") << "\n";
  gtest_data(t, c, ref, with_lse);
  gtest_helpers(t, c.format);
  gtest_test(t, o, f, c, with_lse);
  return t.str();
}

// The command comes from ATTNCHECK_REPRO_COMMAND, or is the one repro was given (`named`): never the
// replay file's, which a file names (a file is data) and the test would run through /bin/sh.
template <class T>
std::string pytest_file(const std::string& replay, const CampaignOptions& o, bool named, const Finding& f, const Case<T>& c,
                        const Reference& ref, bool with_lse, const std::string& why) {
  const Shape& s = c.shape;
  const bool bits = is_narrow(c.format);
  auto format_array = [&](const std::vector<T>& x, const std::string& shape) {
    return std::string("np.array(") + (bits ? "[" : "[float.fromhex(x) for x in (") + values(x, c.format, true) +
           (bits ? "], np.uint16)" : ",)], np.") +
           (bits                      ? ""
            : c.format == Format::f64 ? "float64)"
                                      : "float32)") +
           ".reshape(" + shape + ")";
  };
  std::string inputs, arguments;
  for_each_input_text(c, format_array, [&](const Slot& s, const auto&, const std::string& python) {
    inputs += std::string(s.name) + " = " + python + "  # " + axes(s) + "\n";
    arguments += std::string(s.name) + "=" + s.name + ", ";
  });
  std::ostringstream t;
  t << "\"\"\"A regression test written by `attncheck repro` (attncheck-repro 1), of the finding below.\n"
    << "The case is the call the oracle found wrong; `exact` is the oracle's out (hi + lo), `bound` the\n"
    << "largest error of any correct kernel. Run: "
    << (named ? "python3 -m pytest THIS.py (ATTNCHECK_REPRO_COMMAND\noverrides the command).\"\"\"\n"
              : "ATTNCHECK_REPRO_COMMAND='the command to test'\npython3 -m pytest THIS.py (the command runs through "
                "/bin/sh).\"\"\"\n")
    << "# attncheck repro --replay " << comment(replay) << "\n# Property." << f.property << ": " << reprintable(why, 400) << ".\n"
    << (named ? "" : "# The replay file's command, run only when you name it: " + comment(o.impl) + "\n")
    << "import os\n\nimport numpy as np\n\nimport attncheck\n\n"
    << "COMMAND = os.environ.get(\"ATTNCHECK_REPRO_COMMAND\"" << (named ? ", " + python_literal(o.impl) : "") << ")\n"
    << "# B " << s.B << ", H " << s.H << ", H_kv " << s.kv_heads() << ", Tq " << s.Tq << ", Tk " << s.Tk << ", dk " << s.dk
    << ", dv " << s.dv << "; " << format_name(c.format) << (bits ? " (bit patterns)" : "") << "\n"
    << inputs;
  const std::string d = dims({s.B, s.H, s.Tq, s.dv});
  t << python_oracle_arrays("", ref.out, d) << (with_lse ? python_oracle_arrays("lse_", ref.lse, dims({s.B, s.H, s.Tq})) : "")
    << "\n\n"
    << "def test_" << f.property << "():\n"
    << "    assert COMMAND, \"name the command to test: ATTNCHECK_REPRO_COMMAND='...' python3 -m pytest THIS.py\"\n"
    << "    " << (with_lse ? "out, lse" : "out") << " = attncheck.run_command(COMMAND, dtype=\""
    << feature(capability_of(c.format)).word << "\", " << arguments << "\n                                " << python_scalars(c)
    << (with_lse ? ", want_lse=True" : "") << ")\n"
    << "    wrong = attncheck.outside_bound(out, exact_hi, exact_lo, bound)\n"
    << (with_lse ? "    wrong += attncheck.outside_bound(lse, lse_exact_hi, lse_exact_lo, lse_bound, name=\"lse\", "
                   "infinities_exact=True)\n"
                 : "")
    << "    assert not wrong, \"\\n\".join(wrong)\n";
  return t.str();
}

// The file on standard output, or in out_path with a line on stderr saying what it is. A file lost
// to a full disk is an error, never a success that wrote nothing.
void write_file(const std::string& file, const std::string& out_path, const std::string& what) {
  if (out_path.empty()) {
    if (!(std::cout << file << std::flush))
      throw std::runtime_error("standard output: cannot write (" + std::string(std::strerror(errno)) + ")");
    return;
  }
  std::ofstream stream(out_path);
  stream << file << std::flush;
  if (!stream) throw std::runtime_error(out_path + ": cannot write");
  std::fprintf(stderr, "attncheck repro: %s: %s\n", out_path.c_str(), what.c_str());
}

template <class T>
std::string test_file(const std::string& replay, const CampaignOptions& o, bool named, const Finding& f, bool with_lse,
                      const Case<T>& c, const std::string& why) {
  refuse_dropout(c);
  const std::vector<uint8_t> every_row(size_t(c.shape.lse_size()), 1);  // never a sample: the wrong row is always judged
  const Reference ref = reference(c.problem(), &every_row);
  return o.command ? pytest_file(replay, o, named, f, c, ref, with_lse, why) : gtest_file(replay, o, f, c, ref, with_lse, why);
}

// The test is written from the call the replay file kept (its failed-call lines), running nothing;
// a file without one (a hang, or written before they were kept) needs the property run once more,
// on an implementation the user names (or trusts).
int repro(const FlagValues& flags) {
  CampaignOptions options;
  const std::string& replay = flags.text("replay");
  const bool named = named_implementation(flags, options);
  const Finding finding = read_replay(replay, options, named);
  const bool standalone = flags.on("standalone");
  if (standalone && !options.command)
    throw std::runtime_error(replay + ": --standalone is for an adapter's finding (a command), not a plugin's");
  if (standalone) adapter_call(options.impl);  // a command that runs no adapter is refused before anything runs
  auto write = [&](const std::string& case_text, bool with_lse, const std::string& why) {
    const std::string what = (standalone        ? "a standalone Python script"
                              : options.command ? "a pytest"
                                                : "a GoogleTest") +
                             std::string(" of Property.") + finding.property + " (" + why + ")";
    write_file(standalone
                   ? standalone_script({replay, options.impl, finding.property, case_text, why, with_lse})
                   : visit_case_text(case_text,
                                     [&](const auto& c) { return test_file(replay, options, named, finding, with_lse, c, why); }),
               flags.text("out"), what);
    return 0;
  };
  if (!named && !finding.failed_call_why.empty())
    return write(finding.failed_call, finding.failed_call_lse, finding.failed_call_why);
  if (!named) require_trusted(flags, replay, options);
  std::vector<KernelCall> calls;
  attncheck::replay(options, finding, &calls);
  const WrongCall wrong = first_wrong_call(calls);
  if (wrong.index == calls.size())
    throw std::runtime_error(replay + ": no call of Property." + finding.property +
                             " is wrong by the oracle (it fails by comparing calls, or no longer fails): "
                             "replay it with attncheck check --replay");
  return write(calls[wrong.index].case_text, !calls[wrong.index].lse.empty(), wrong.why);
}

}  // namespace

int repro_command(const std::vector<std::string>& given) {
  // `attncheck repro FILE.replay`: a first word that is no flag is the replay file.
  std::vector<std::string> args = given;
  if (!args.empty() && args[0].rfind("-", 0) != 0) args.insert(args.begin(), "--replay");
  Flags flags("repro");
  return implementation_flags(flags)
      .text("replay", "FILE",
            "the replay file of a finding (attncheck check --counterexample); also the first word, as FILE alone. The "
            "test is written from the call it kept, running nothing; with --impl or --impl-cmd the property runs once "
            "more on that implementation, and the test is of its first wrong call")
      .required()
      .text("out", "FILE", "where the test goes (default: standard output)", "")
      .boolean("standalone",
               "for an adapter's finding (--impl-cmd 'python -m attncheck.adapters.NAME ...'): a Python script that "
               "needs only NumPy and the library, with the problem as exact bits, the adapter's source and options, "
               "the oracle's values and bound; it exits 1 while the library deviates")
      .run(args, repro);
}

}  // namespace attncheck
