#include "attncheck/replay_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "attncheck/case_text.hpp"
#include "attncheck/printable.hpp"

namespace attncheck {
namespace {

// A case text's body after its first line, up to its `end` line, checked by the case reader.
std::string read_case(std::istream& in, const std::string& first, const std::string& name, const char* what) {
  std::string text = first + "\n";
  for (std::string item; std::getline(in, item);) {
    text += item + "\n";
    if (item == "end") break;
  }
  try {
    visit_case_text(text, [](const auto&) { return 0; });
  } catch (const std::exception& e) {
    throw std::runtime_error(name + ": " + what + e.what());
  }
  return text;
}

// The domain's lines: "restrictions WORD..." and "limits WORD VALUE..." (head_dims' values joined
// by commas), each written only when it says something.
std::string domain_lines(const Domain& d) {
  std::string text;
  for (const Restriction& r : kRestrictions)
    if (d.only(r.bit)) text += (text.empty() ? "restrictions " : " ") + std::string(r.word);
  std::string limits;
  for (const LimitField& l : kLimitFields)
    if (d.limits.*l.field) limits += " " + std::string(l.word) + " " + std::to_string(d.limits.*l.field);
  for (size_t n = 0; n < d.limits.widths.size(); ++n)
    limits += (n ? "," : " " + std::string(kHeadDimsWord) + " ") + std::to_string(d.limits.widths[n]);
  return (text.empty() ? "" : text + "\n") + (limits.empty() ? "" : "limits" + limits + "\n");
}

uint32_t restriction_bits(const std::string& words, const std::runtime_error& unknown) {
  uint32_t bits = 0;
  std::istringstream in(words);
  for (std::string word; in >> word;) {
    const Restriction* row = nullptr;
    for (const Restriction& r : kRestrictions)
      if (word == r.word) row = &r;
    if (!row) throw unknown;
    bits |= row->bit;
  }
  return bits;
}

int64_t limit_number(const std::string& text, const std::runtime_error& bad) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) throw bad;
  return std::stoll(text);
}

Limits limits_of(const std::string& words, const std::runtime_error& bad) {
  Limits l;
  std::istringstream in(words);
  for (std::string word, value; in >> word;) {
    if (!(in >> value)) throw bad;
    if (word == kHeadDimsWord) {
      std::istringstream widths(value);
      for (std::string width; std::getline(widths, width, ',');) l.widths.push_back(limit_number(width, bad));
      continue;
    }
    const LimitField* field = nullptr;
    for (const LimitField& f : kLimitFields)
      if (word == f.word) field = &f;
    if (!field) throw bad;
    l.*field->field = limit_number(value, bad);
  }
  return l;
}

}  // namespace

ReplayFile parse_replay(std::istream& in, const std::string& name) {
  auto error = [&](const std::string& why) { return std::runtime_error(name + ": " + why); };
  ReplayFile r;
  std::string header;
  if (!std::getline(in, header) || (header != "attncheck-replay 1" && header != "attncheck-replay 2"))
    throw error("not an attncheck replay file (first line is not 'attncheck-replay 1' or 2)");
  r.format = header == "attncheck-replay 2" ? 2 : 1;
  std::set<std::string> seen;  // a file that is not whole is an error, never a replay of something else
  std::string failed_call;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);  // the rest: a path may hold spaces
    if (key != "failed-call" && !seen.insert(key == "impl-cmd" ? "impl" : key).second)
      throw error("a second '" + printable(key) + "' line");
    if (key == "property") {
      r.property = value;
    } else if (key == "impl" || key == "impl-cmd") {
      r.impl = value;
      r.command = key == "impl-cmd";
    } else if (const Policy* p = policy_named(key)) {
      const auto choice = policy_choice(*p, value);
      if (!choice) throw error(key + " must be one of " + choices_text(*p));
      p->set(r.policies, *choice);
    } else if (key == "restrictions") {
      r.domain.restrictions = restriction_bits(value, error("the restrictions line holds a word no restriction has"));
    } else if (key == "limits") {
      r.domain.limits = limits_of(value, error("the limits line must be names of limits, each with a number"));
    } else if (key == "case") {
      if (r.format == 1) throw error("a format-1 file holds no case (is its first line damaged?)");
      r.case_text = read_case(in, line, name, "");
    } else if (key == "choices") {
      std::istringstream numbers(value);
      for (uint64_t choice; numbers >> choice;) r.choices.push_back(choice);
      if (!numbers.eof()) throw error("the choices line holds something that is not a number");
    } else if (key == "failed-call") {
      failed_call += value + "\n";  // checked once whole
    } else if (key == "failed-call-why") {
      r.failed_call_why = reprintable(value, 400);
    } else if (key == "failed-call-lse") {
      if (value != "yes" && value != "no") throw error("failed-call-lse must be yes or no");
      r.failed_call_lse = value == "yes";
    } else {
      throw error("an unknown line '" + printable(line) + "'");
    }
  }
  for (const char* needed : {"property", "impl", "empty-rows", "choices"})
    if (!seen.count(needed)) throw error(std::string("no '") + needed + "' line: the file is not whole");
  if (const std::string why = domain_error(r.domain); !why.empty()) throw error("its domain: " + why);
  if (!failed_call.empty()) {
    std::istringstream call(failed_call);
    std::string first;
    std::getline(call, first);
    r.failed_call = read_case(call, first, name, "its failed-call lines: ");
  }
  return r;
}

ReplayFile read_replay_file(const std::string& path) {
  // Opened without blocking and checked before a byte is read: a FIFO would wait for a writer, a
  // device (/dev/zero) never end.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(path + ": cannot open the replay file (" + std::strerror(errno) + ")");
  struct stat st {};
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  close(fd);
  if (!regular) throw std::runtime_error(path + ": cannot open the replay file (not a regular file)");
  if (uint64_t(st.st_size) > kLongestReplayFile)
    throw std::runtime_error(path + ": " + std::to_string(st.st_size) + " bytes, larger than any replay file (" +
                             std::to_string(kLongestReplayFile) + ")");
  std::ifstream file(path);
  if (!file) throw std::runtime_error(path + ": cannot open the replay file");
  return parse_replay(file, path);
}

std::string replay_text(const ReplayFile& r) {
  std::ostringstream text;
  text << "attncheck-replay " << r.format << "\nproperty " << r.property << (r.command ? "\nimpl-cmd " : "\nimpl ") << r.impl
       << "\n";
  for (const Policy& p : kPolicies) text << p.flag << ' ' << policy_word(p, r.policies) << '\n';
  text << domain_lines(r.domain) << r.case_text << "choices";
  for (uint64_t choice : r.choices) text << ' ' << choice;
  text << '\n';
  std::istringstream failed_call(r.failed_call);
  for (std::string line; std::getline(failed_call, line);) text << "failed-call " << line << '\n';
  if (!r.failed_call.empty() && !r.failed_call_why.empty())
    text << "failed-call-why " << r.failed_call_why << "\nfailed-call-lse " << (r.failed_call_lse ? "yes" : "no") << '\n';
  return text.str();
}

void write_replay_file(const std::string& path, const ReplayFile& r) {
  struct stat st;
  const bool in_place = stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  const std::string target = in_place ? path : path + ".tmp." + std::to_string(getpid());
  const auto failed = [&](const std::string& why) {
    if (!in_place) std::remove(target.c_str());
    return std::runtime_error(path + ": cannot write the replay file (" + why + ")");
  };
  std::ofstream file(target);
  if (!file) throw failed(std::strerror(errno));
  file << replay_text(r);
  file.close();
  if (!file) throw failed(std::strerror(errno));
  if (!in_place && std::rename(target.c_str(), path.c_str()) != 0) throw failed(std::strerror(errno));
}

}  // namespace attncheck
