// A campaign on every core: options.jobs worker processes, each forked from the checker with its
// own kernel child, each running its share of the one sequence of runs (run_campaign_share); each
// sends its result back as JSON through a pipe, and the checker merges them. A worker that dies is
// reported, never taken for a pass.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "attncheck/campaign.hpp"
#include "attncheck/protocol.hpp"
#include "attncheck/report_writers.hpp"

namespace attncheck {
namespace {

using Json = nlohmann::json;

// A number that may be NaN or infinite, which JSON's numbers cannot hold: as its text then
// (number_json, report_writers.hpp), and read back.
Json number(double x) { return number_json<Json>(x); }
double number(const Json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string text = j.get<std::string>();
  return text == "nan"   ? std::numeric_limits<double>::quiet_NaN()
         : text == "inf" ? std::numeric_limits<double>::infinity()
                         : -std::numeric_limits<double>::infinity();
}

// A Mismatch's tensor name, kept for the life of the process (Mismatch holds a pointer).
const char* interned(const std::string& name) {
  static std::set<std::string> names;
  return names.insert(name).first->c_str();
}

Json to_json(const Diagnosis& d) {
  const Mismatch& m = d.element;
  return {{"wrong", d.wrong},
          {"tensor", m.tensor ? m.tensor : ""},
          {"rank", m.rank},
          {"at", std::vector<int64_t>(m.at, m.at + 4)},
          {"computed", number(m.computed)},
          {"exact", number(double(m.exact))},
          {"bound", number(m.bound)},
          {"ratio", number(m.ratio)},
          {"fault", d.fault},
          {"shape", d.shape},
          {"features", d.features},
          {"needs", d.needs},
          {"varies", d.varies},
          {"poisoned", d.poisoned},
          {"extreme", d.extreme},
          {"accepted_under", d.accepted_under},
          {"accepting", d.accepting},
          {"cause", d.cause}};
}

Diagnosis diagnosis_from(const Json& j) {
  Diagnosis d;
  Mismatch& m = d.element;
  d.wrong = j.at("wrong");
  const std::string tensor = j.at("tensor");
  m.tensor = tensor.empty() ? nullptr : interned(tensor);
  m.rank = j.at("rank");
  const std::vector<int64_t> at = j.at("at");
  std::copy(at.begin(), at.begin() + 4, m.at);
  m.computed = number(j.at("computed"));
  m.exact = number(j.at("exact"));
  m.bound = number(j.at("bound"));
  m.ratio = number(j.at("ratio"));
  d.fault = j.at("fault");
  d.shape = j.at("shape");
  d.features = j.at("features").get<std::vector<std::string>>();
  d.needs = j.at("needs").get<std::vector<std::string>>();
  d.varies = j.at("varies");
  d.poisoned = j.at("poisoned");
  d.extreme = j.at("extreme");
  d.accepted_under = j.at("accepted_under").get<std::vector<std::string>>();
  d.accepting = j.at("accepting");
  d.cause = j.at("cause");
  return d;
}

Json to_json(const Finding& f) {
  return {{"property", f.property},
          {"message", f.message},
          {"choices", f.choices},
          {"kept", f.kept},
          {"case_text", f.case_text},
          {"kept_choices", f.kept_choices},
          {"ladder", f.ladder},
          {"capabilities", f.capabilities},
          {"last_call_case", f.last_call_case},
          {"failed_call", f.failed_call},
          {"failed_call_why", f.failed_call_why},
          {"failed_call_lse", f.failed_call_lse},
          {"hung", f.hung},
          {"ratio", number(f.ratio)},
          {"found_at", f.found_at},
          {"kind", f.kind},
          {"run_kind", f.run_kind},
          {"format", f.format},
          {"diagnosis", to_json(f.diagnosis)}};
}

Finding finding_from(const Json& j) {
  Finding f;
  f.property = j.at("property");
  f.message = j.at("message");
  f.choices = j.at("choices").get<std::vector<uint64_t>>();
  f.kept = j.at("kept");
  f.case_text = j.at("case_text");
  f.kept_choices = j.at("kept_choices").get<std::vector<uint64_t>>();
  f.ladder = j.at("ladder");
  f.capabilities = j.at("capabilities");
  f.last_call_case = j.at("last_call_case");
  f.failed_call = j.at("failed_call");
  f.failed_call_why = j.at("failed_call_why");
  f.failed_call_lse = j.at("failed_call_lse");
  f.hung = j.at("hung");
  f.ratio = number(j.at("ratio"));
  f.found_at = j.at("found_at");
  f.kind = j.at("kind");
  f.run_kind = j.at("run_kind");
  f.format = j.at("format");
  f.diagnosis = diagnosis_from(j.at("diagnosis"));
  return f;
}

Json limits_json(const Limits& l) {
  Json json = {{kHeadDimsWord, l.widths}};
  for (const LimitField& f : kLimitFields) json[f.word] = l.*f.field;
  return json;
}

Json to_json(const CampaignResult& r) {
  Json findings = Json::array();
  for (const Finding& f : r.findings) findings.push_back(to_json(f));
  return {{"findings", findings},
          {"cases", r.cases},
          {"per_property", r.per_property},
          {"per_property_seconds", r.per_property_seconds},
          {"seconds", r.seconds},
          {"shrink_seconds", r.shrink_seconds},
          {"worst_ratio", number(r.worst_ratio)},
          {"fp_mode", r.fp_mode},
          {"abi_version", r.abi_version},
          {"impl_said", r.impl_said},
          {"capabilities", r.capabilities},
          {"not_applicable", r.not_applicable},
          {"examine_seconds", r.examine_seconds},
          {"start_seconds", r.start_seconds},
          {"calls", r.calls},
          {"not_taken", r.not_taken},
          {"cut_runs", r.cut_runs},
          {"not_taken_reasons", r.not_taken_reasons},
          {"not_taken_runs", r.not_taken_runs},
          {"restrictions", r.domain.restrictions},
          {"limits", limits_json(r.domain.limits)}};
}

CampaignResult result_from(const Json& j) {
  CampaignResult r;
  for (const Json& f : j.at("findings")) r.findings.push_back(finding_from(f));
  r.cases = j.at("cases");
  r.per_property = j.at("per_property").get<std::map<std::string, int64_t>>();
  r.per_property_seconds = j.at("per_property_seconds").get<std::map<std::string, double>>();
  r.seconds = j.at("seconds");
  r.shrink_seconds = j.at("shrink_seconds");
  r.worst_ratio = number(j.at("worst_ratio"));
  r.fp_mode = j.at("fp_mode");
  r.abi_version = j.at("abi_version");
  r.impl_said = j.at("impl_said");
  r.capabilities = j.at("capabilities");
  r.not_applicable = j.at("not_applicable").get<std::map<std::string, std::string>>();
  r.examine_seconds = j.at("examine_seconds");
  r.start_seconds = j.at("start_seconds");
  r.calls = j.at("calls");
  r.not_taken = j.at("not_taken");
  r.cut_runs = j.at("cut_runs");
  r.not_taken_reasons = j.at("not_taken_reasons").get<std::map<std::string, int64_t>>();
  r.not_taken_runs = j.at("not_taken_runs").get<std::map<std::string, int64_t>>();
  r.domain.restrictions = j.at("restrictions");
  for (const LimitField& l : kLimitFields) r.domain.limits.*l.field = j.at("limits").at(l.word);
  r.domain.limits.widths = j.at("limits").at(kHeadDimsWord).get<std::vector<int64_t>>();
  return r;
}

// The shares as one campaign: counts summed, seconds the longest share's (they ran side by side),
// the findings in the sequence's order: the first alone, or with keep_going each distinct one.
CampaignResult merged(const std::vector<CampaignResult>& shares, const CampaignOptions& options) {
  CampaignResult r;
  r.abi_version = shares.front().abi_version;
  r.impl_said = shares.front().impl_said;
  r.capabilities = shares.front().capabilities;
  r.domain = shares.front().domain;
  r.not_applicable = shares.front().not_applicable;
  std::vector<Finding> all;
  for (const CampaignResult& share : shares) {
    r.cases += share.cases;
    r.calls += share.calls;
    r.not_taken += share.not_taken;
    r.cut_runs += share.cut_runs;
    for (const auto& [reason, count] : share.not_taken_reasons) r.not_taken_reasons[reason] += count;
    for (const auto& [name, count] : share.not_taken_runs) r.not_taken_runs[name] += count;
    r.examine_seconds = std::max(r.examine_seconds, share.examine_seconds);
    r.start_seconds = std::max(r.start_seconds, share.start_seconds);
    for (const auto& [name, count] : share.per_property) r.per_property[name] += count;
    for (const auto& [name, seconds] : share.per_property_seconds) r.per_property_seconds[name] += seconds;
    r.seconds = std::max(r.seconds, share.seconds);
    r.shrink_seconds = std::max(r.shrink_seconds, share.shrink_seconds);
    r.worst_ratio = std::max(r.worst_ratio, share.worst_ratio);
    if (r.fp_mode.empty()) r.fp_mode = share.fp_mode;
    all.insert(all.end(), share.findings.begin(), share.findings.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Finding& a, const Finding& b) { return a.found_at < b.found_at; });
  for (Finding& f : all) {
    if (!r.findings.empty() && (!options.keep_going || seen_before(f, r.findings))) continue;
    r.findings.push_back(std::move(f));
  }
  r.found = !r.findings.empty();
  if (r.found) r.finding = r.findings.front();
  return r;
}

// What the workers share, in a page every one of them maps: the earliest finding's place, and the
// cases each has run and whether it is shrinking, for the checker's progress line.
struct Shared {
  std::atomic<int64_t> first_finding{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> properties{0};
  std::atomic<int64_t> cases[kMaxJobs];
  std::atomic<bool> shrinking{false};
};

// The worker's side: its share, its result or its error as JSON down `fd`, then it ends.
[[noreturn]] void work(const CampaignOptions& options, int worker, Shared& shared, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // the checker gone, nobody reads its result
  CampaignOptions mine = options;
  mine.progress = [&](const CampaignOptions::Progress& p) {
    shared.cases[worker] = p.cases;
    for (int64_t seen = shared.properties.load();
         int64_t(p.properties) > seen && !shared.properties.compare_exchange_weak(seen, int64_t(p.properties));) {}
    if (p.shrinking) shared.shrinking = true;
  };
  Json answer;
  try {
    answer = {{"result", to_json(run_campaign_share(mine, {worker, options.jobs, &shared.first_finding}))}};
  } catch (const std::logic_error& e) {
    answer = {{"logic_error", e.what()}};
  } catch (const std::exception& e) {
    answer = {{"error", e.what()}};
  }
  const std::string text = answer.dump(-1, ' ', false, Json::error_handler_t::replace);  // never throws on bytes
  const bool sent =
      protocol::write_all(fd, text.data(), text.size(), std::numeric_limits<double>::infinity()) == protocol::Io::ok;
  _exit(sent ? 0 : 3);
}

using Clock = std::chrono::steady_clock;

// The worker processes, forked, and the reading end of each one's pipe (-1 once read to its end).
struct Workers {
  std::vector<pid_t> pids;
  std::vector<int> fds;
};

// Forks `each.jobs` workers, each running its share of `each` with `shared`.
Workers start_workers(const CampaignOptions& each, Shared& shared) {
  Workers workers;
  for (int worker = 0; worker < each.jobs; ++worker) {
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe for a worker");
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("cannot start a worker process");
    if (pid == 0) {
      close(ends[0]);
      work(each, worker, shared, ends[1]);
    }
    close(ends[1]);
    workers.pids.push_back(pid);
    workers.fds.push_back(ends[0]);
  }
  return workers;
}

// Every worker's answer, read as it comes (a full pipe would stop a worker), with the progress
// line drawn from the shared page four times a second.
std::vector<std::string> read_answers(const CampaignOptions& options, Workers& workers, Shared& shared) {
  const int jobs = int(workers.fds.size());
  std::vector<int>& fds = workers.fds;
  std::vector<std::string> texts(static_cast<size_t>(jobs));
  const Clock::time_point start = Clock::now();
  bool stop_passed_on = false;
  for (size_t open = fds.size(); open > 0;) {
    // A stop the checker was asked for (SIGTERM to it alone) is each worker's: they end their shares
    // and send what they found.
    if (protocol::stop_requested() && !stop_passed_on) {
      for (const pid_t pid : workers.pids) kill(pid, SIGTERM);
      stop_passed_on = true;
    }
    std::vector<pollfd> wait;
    for (int fd : fds)
      if (fd >= 0) wait.push_back({fd, POLLIN, 0});
    poll(wait.data(), wait.size(), 250);
    for (int worker = 0; worker < jobs; ++worker) {
      if (fds[size_t(worker)] < 0) continue;
      pollfd one{fds[size_t(worker)], POLLIN, 0};
      if (poll(&one, 1, 0) <= 0) continue;
      char buffer[65536];
      const ssize_t n = read(fds[size_t(worker)], buffer, sizeof buffer);
      if (n > 0) {
        texts[size_t(worker)].append(buffer, size_t(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[size_t(worker)]);
        fds[size_t(worker)] = -1;
        --open;
      }
    }
    if (options.progress) {
      int64_t cases = 0;
      for (int worker = 0; worker < jobs; ++worker) cases += shared.cases[worker];
      options.progress({cases, size_t(shared.properties.load()), std::chrono::duration<double>(Clock::now() - start).count(),
                        shared.shrinking.exchange(false)});
    }
  }
  return texts;
}

// The workers' results, each taken once its worker has ended: the shares sent, the first error a
// worker sent, and a worker that died or ended without its result (`failure`, a bug of attncheck's).
struct Answers {
  std::vector<CampaignResult> shares;
  std::string failure, error;
};

Answers answers_of(const Workers& workers, const std::vector<std::string>& texts) {
  Answers answers;
  for (size_t worker = 0; worker < workers.pids.size(); ++worker) {
    int status = 0;
    waitpid(workers.pids[worker], &status, 0);
    const Json answer = Json::parse(texts[worker], nullptr, false);
    if (answer.is_object() && answer.contains("logic_error")) throw std::logic_error(answer["logic_error"].get<std::string>());
    if (answer.is_object() && answer.contains("error")) {
      if (answers.error.empty()) answers.error = answer["error"].get<std::string>();
      continue;
    }
    if (!answer.is_object() || !answer.contains("result")) {
      answers.failure =
          "worker " + std::to_string(worker) + " of the campaign " +
          (WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status)) : "ended without its result") +
          ": a bug of attncheck's, not of the kernel (--jobs 1 runs the campaign in one process)";
      continue;
    }
    answers.shares.push_back(result_from(answer["result"]));
  }
  return answers;
}

}  // namespace

CampaignResult run_campaign(const CampaignOptions& options) {
  if (options.jobs <= 1) return run_campaign_share(options, {});
  const int jobs = std::min(options.jobs, kMaxJobs);
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::runtime_error("cannot map a page for the workers");
  Shared& shared = *new (page) Shared();
  std::fflush(nullptr);  // nothing buffered is written twice
  CampaignOptions each = options;
  each.jobs = jobs;
  Workers workers = start_workers(each, shared);
  const std::vector<std::string> texts = read_answers(options, workers, shared);
  Answers answers = answers_of(workers, texts);
  // A kernel that started in one worker and not in another may have met itself: a command that
  // runs one instance at a time (a lock, a device) hangs or fails in all but one.
  std::string& error = answers.error;
  if (!error.empty() && !answers.shares.empty())  // said on the error's first line, before a command's stderr
    error.insert(std::min(error.find('\n'), error.size()),
                 " (it started in " + std::to_string(answers.shares.size()) + " of " + std::to_string(jobs) +
                     " workers: --jobs " + std::to_string(jobs) +
                     " runs as many instances of it at once; one that runs one at a time needs --jobs 1)");
  if (!error.empty()) throw std::runtime_error(error);
  munmap(page, sizeof(Shared));
  if (!answers.failure.empty()) throw std::logic_error(answers.failure);
  return merged(answers.shares, options);
}

}  // namespace attncheck
