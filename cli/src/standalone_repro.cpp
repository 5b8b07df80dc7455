// attncheck repro --standalone: an adapter's finding as a Python script of its own. What a person
// sends a library's maintainers: it runs with plain python3, NumPy and the library, and holds the
// problem as exact bit patterns, the adapter that translated it into the library's inputs (its
// source, pasted whole, and the options it ran with), the oracle's exact values and bound, and the
// rule that judges them (python/attncheck/_bound.py, pasted whole as well).
#include "attncheck/standalone_repro.hpp"

#include <map>
#include <sstream>
#include <stdexcept>

#include "attncheck/case_text.hpp"
#include "attncheck/features.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/source_text.hpp"

namespace attncheck {

const std::map<std::string, std::string>& python_sources();  // python_sources.cpp, generated

namespace {

constexpr const char* kModule = "attncheck.adapters.";

std::vector<std::string> words(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> all;
  for (std::string word; in >> word;) all.push_back(word);
  return all;
}

// One of python_sources(), or an error naming the file.
const std::string& source(const std::string& name) {
  const auto found = python_sources().find(name);
  if (found == python_sources().end()) throw std::runtime_error("this attncheck was built without python/attncheck/" + name);
  const std::string& text = found->second;
  if (text.find("'''") != std::string::npos || text.empty() || text.back() != '\n')
    throw std::runtime_error("python/attncheck/" + name +
                             " holds ''' or does not end in a line break: the script's "
                             "raw string cannot hold it");
  return found->second;
}

// The adapters an adapter's source imports from its package by name alone (`from . import NAME`,
// openvino's `--op paged` importing openvino_paged), as a Python dict of NAME to its pasted source.
std::string sibling_sources(const std::string& adapter_source) {
  std::string dict = "{";
  const std::string line = "from . import ";
  for (size_t at = adapter_source.find(line); at != std::string::npos; at = adapter_source.find(line, at + 1)) {
    const size_t start = at + line.size(), end = adapter_source.find('\n', start);
    const std::string name = adapter_source.substr(start, end - start);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789") == std::string::npos &&
        python_sources().count("adapters/" + name + ".py"))
      dict += (dict.size() > 1 ? ",\n    \"" : "\n    \"") + name + "\": r'''" + source("adapters/" + name + ".py") + "'''";
  }
  return dict + "}";
}

// A Python list of the words, each a string literal (a word that is not UTF-8 as sys.argv would hold it).
std::string python_list(const std::vector<std::string>& items) {
  std::string text = "[";
  for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + python_literal(items[i]);
  return text + "]";
}

// A tensor of the problem as the adapter gets it (attncheck.Problem's arrays), as a NumPy expression
// of `shape` (reshape's arguments): from bit patterns, bf16 as float32 holding its values.
template <class T>
std::string tensor(const std::vector<T>& x, Format format, const std::string& shape) {
  static const std::map<Format, const char*> from_bits = {{Format::f16, "np.array([%s], np.uint16).view(np.float16)"},
                                                          {Format::bf16, "(np.array([%s], np.uint32) << 16).view(np.float32)"},
                                                          {Format::f32, "np.array([%s], np.uint32).view(np.float32)"},
                                                          {Format::f64, "np.array([%s], np.uint64).view(np.float64)"}};
  const std::string pattern = from_bits.at(format);
  const std::string literals = joined(x, [&](T v) { return bits_literal(double(v), format); });
  const size_t at = pattern.find("%s");
  return pattern.substr(0, at) + literals + pattern.substr(at + 2) + ".reshape(" + shape + ")";
}

template <class T>
std::string problem_lines(const Case<T>& c, bool with_lse) {
  const Shape& s = c.shape;
  std::ostringstream t;
  t << "# B " << s.B << ", H " << s.H << ", H_kv " << s.kv_heads() << ", Tq " << s.Tq << ", Tk " << s.Tk << ", dk " << s.dk
    << ", dv " << s.dv << "; " << format_name(c.format) << ", from its bit patterns\n"
    << "problem = types.SimpleNamespace(\n    dtype=\"" << feature(capability_of(c.format)).word << "\", B=" << s.B
    << ", H=" << s.H << ", H_kv=" << s.kv_heads() << ", Tq=" << s.Tq << ", Tk=" << s.Tk << ", dk=" << s.dk << ", dv=" << s.dv
    << ", NB=" << s.NB << ", BS=" << s.BS << ", BPS=" << s.BPS << ", S=" << (s.varlen ? s.B + 1 : 0)  // paged, varlen: 0 when not
    << ",\n    " << python_scalars(c) << ", want_lse=" << (with_lse ? "True" : "False")
    << ", backward=False,\n    dropout_p=0.0, dropout_seed=0, want_keep=False)\n";
  for_each_input_text(
      c, [&](const std::vector<T>& x, const std::string& shape) { return tensor(x, c.format, shape); },
      [&](const Slot& s, const auto&, const std::string& python) {
        t << "problem." << s.name << " = " << python << "  # " << axes(s)
          << (s.element == Element::byte ? ", True = may attend" : "") << "\n";
      });
  return t.str();
}

// The script's part that is the same for every finding: the pasted modules made importable, the
// call, the verdict. `adapter` is the module's name (jax, onnxruntime, ...).
std::string run_lines(const std::string& adapter, bool with_lse) {
  std::ostringstream t;
  t << "\n\ndef library(name, adapter, entry=None, since=None):\n"
    << "    \"\"\"The library, or one line and exit 2 (not 1, which says the library deviates); the release\n"
    << "    check of attncheck's own library() (entry, since) is not repeated here.\"\"\"\n"
    << "    try:\n        return importlib.import_module(name)\n"
    << "    except ImportError as error:\n"
    << "        sys.stderr.write(f\"this script needs the Python package {name!r}: {error}\\n\")\n"
    << "        sys.exit(2)\n\n\n"
    << "def refuse(adapter, why):\n"
    << "    \"\"\"The adapter cannot run on this release: one line, exit 2.\"\"\"\n"
    << "    sys.stderr.write(f\"attncheck.adapters.{adapter}: {why}\\n\")\n"
    << "    sys.exit(2)\n\n\n"
    << "def version(text):\n"
    << "    \"\"\"A release's leading numbers as a tuple, as attncheck's adapters package has it.\"\"\"\n"
    << "    match = re.match(r\"\\d+(\\.\\d+)*\", str(text))\n"
    << "    return tuple(int(x) for x in match.group().split(\".\")) if match else ()\n\n\n"
    << "def module(name, source):\n"
    << "    \"\"\"A pasted attncheck file as the module it is; what an adapter imports from attncheck's\n"
    << "    adapters package is here: library, refuse, version and NotExpressible.\"\"\"\n"
    << "    package = sys.modules.setdefault(\"attncheck_pasted\", types.ModuleType(\"attncheck_pasted\"))\n"
    << "    package.__path__ = []\n"
    << "    package.library, package.refuse, package.version = library, refuse, version\n"
    << "    package.serve = None  # the adapter's main() alone calls it, and the script calls setup()\n"
    << "    package.NotExpressible = type(\"NotExpressible\", (ValueError,), {})\n"
    << "    pasted = types.ModuleType(\"attncheck_pasted.\" + name)\n"
    << "    pasted.__package__ = package.__name__\n"
    << "    sys.modules[pasted.__name__] = pasted\n"
    << "    exec(compile(source, \"attncheck/\" + name.replace(\".\", \"/\") + \".py\", \"exec\"), pasted.__dict__)\n"
    << "    return pasted\n\n\n"
    << "def main():\n"
    << "    rule = module(\"_bound\", BOUND_SOURCE)\n"
    << "    # p.mask(), attncheck.Problem's (_problem.py, which imports the wire format it does not use here)\n"
    << "    sys.modules[\"attncheck_pasted._protocol\"] = types.ModuleType(\"attncheck_pasted._protocol\")\n"
    << "    problem.mask = types.MethodType(module(\"_problem\", PROBLEM_SOURCE).Problem.mask, problem)\n"
    << "    for name, text in SIBLING_SOURCES.items():  # the adapters it imports\n"
    << "        module(name, text)\n"
    << "    served = module(\"adapters." << adapter << "\", ADAPTER_SOURCE).setup(ADAPTER_OPTIONS)\n"
    << "    result = served[\"forward\"](problem)\n"
    << "    out, lse = result if problem.want_lse else (result, None)\n"
    << "    out = np.asarray(out)  # as attncheck's serve takes it: in the problem's format, of out's shape\n"
    << "    if out.shape != exact_hi.shape:\n"
    << "        print(f\"the library returned out of shape {out.shape}, not {exact_hi.shape}\")\n"
    << "        return 1\n"
    << "    out = out.astype({\"f16\": np.float16, \"bf16\": np.float32, \"f32\": np.float32, \"f64\": "
       "np.float64}[problem.dtype])\n"
    << "    wrong = rule.outside_bound(out, exact_hi, exact_lo, bound)\n";
  if (with_lse)
    t << "    wrong += rule.outside_bound(np.asarray(lse), lse_exact_hi, lse_exact_lo, lse_bound, name=\"lse\", "
         "infinities_exact=True)\n";
  t << "    print(f\"{len(wrong)} elements outside attncheck's bound (the library's value, the exact one, the bound):\"\n"
    << "          if wrong else \"every element within attncheck's bound\")\n"
    << "    print(\"\\n\".join(wrong))\n"
    << "    return 1 if wrong else 0\n\n\n"
    << "if __name__ == \"__main__\":\n    sys.exit(main())\n";
  return t.str();
}

template <class T>
std::string script(const StandaloneCall& call, const AdapterCall& adapter, const Case<T>& c) {
  const Shape& s = c.shape;
  refuse_dropout(c);
  const std::vector<uint8_t> every_row(size_t(s.lse_size()), 1);  // never a sample: the wrong row is always judged
  const Reference ref = reference(c.problem(), &every_row);
  const std::string file = "adapters/" + adapter.name + ".py";
  std::ostringstream t;
  // What the replay file says (its command, why the call was wrong) goes on comment lines only: a
  // file is data, and no quote in it may end a string of the script. The why is a report's text,
  // escaped where it came in: not escaped again (reprintable).
  t << "\"\"\"A standalone reproduction written by `attncheck repro --standalone` (attncheck-repro 1).\n\n"
    << "It needs Python 3, NumPy and the library the adapter calls; not attncheck. Below: the problem as\n"
    << "exact bit patterns; attncheck's adapter " << adapter.name << " (python/attncheck/" << file << ", pasted whole),\n"
    << "which translates the problem into the library's own inputs and calls the library, run with the\n"
    << "options it had; the oracle's exact output (hi + lo) and the bound of any correct implementation;\n"
    << "and attncheck's rule for them (python/attncheck/_bound.py, pasted whole); the problem's mask()\n"
    << "(python/attncheck/_problem.py, pasted whole) and the adapters this one imports. Run: python3 THIS.py.\n"
    << "It prints each element outside the bound and exits 1 (the library raising is a traceback, and\n"
    << "exits 1), or says every element is within it and exits 0.\n\"\"\"\n"
    << "# attncheck repro --standalone --replay " << comment(call.replay) << "\n"
    << "# Property." << call.property << " on: " << comment(call.command) << "\n"
    << "# " << reprintable(call.why, 400) << "\n"
    << "import importlib\nimport re\nimport sys\nimport types\n\nimport numpy as np\n\n"
    << problem_lines(c, call.with_lse) << "\n# attncheck's oracle\n"
    << python_oracle_arrays("", ref.out, dims({s.B, s.H, s.Tq, s.dv}))
    << (call.with_lse ? python_oracle_arrays("lse_", ref.lse, dims({s.B, s.H, s.Tq})) : "")
    << "\nADAPTER_OPTIONS = " << python_list(adapter.options) << "\n"
    << "ADAPTER_SOURCE = r'''" << source(file) << "'''\n"
    << "SIBLING_SOURCES = " << sibling_sources(source(file)) << "\n"
    << "BOUND_SOURCE = r'''" << source("_bound.py") << "'''\n"
    << "PROBLEM_SOURCE = r'''" << source("_problem.py") << "'''\n"
    << run_lines(adapter.name, call.with_lse);
  return t.str();
}

}  // namespace

AdapterCall adapter_call(const std::string& command) {
  if (command.find_first_of("'\"\\$`") != std::string::npos)
    throw std::runtime_error("the command '" + printable(command, 200) +
                             "' is quoted or escaped for the shell: a standalone script takes the words of a plain one");
  const std::vector<std::string> all = words(command);
  for (size_t i = 0; i + 1 < all.size(); ++i)
    if (all[i] == "-m" && all[i + 1].rfind(kModule, 0) == 0)
      return {all[i + 1].substr(std::string(kModule).size()), {all.begin() + long(i) + 2, all.end()}};
  throw std::runtime_error("the command '" + printable(command, 200) +
                           "' runs no adapter (python -m attncheck.adapters.NAME): a standalone script is of an "
                           "adapter's call; for another command, attncheck repro writes a pytest file");
}

std::string standalone_script(const StandaloneCall& call) {
  const AdapterCall adapter = adapter_call(call.command);
  return visit_case_text(call.case_text, [&](const auto& c) { return script(call, adapter, c); });
}

}  // namespace attncheck
