// The replay program of a fuzz target, built in every configuration (g++ or clang, no libFuzzer)
// so that no target can rot: runs the target once on each file named and on every file under each
// directory named (sorted; hidden files such as .gitkeep skipped). A kept text (docs/fuzzing.md,
// "The corpus") is checked as the input it holds, any other file is libFuzzer's bytes for
// LLVMFuzzerTestOneInput. A failing input aborts inside the target after its path was printed;
// exit 0 means every input passed, 2 a bad path or a malformed kept text (one line).
// `--keep FILE` prints FILE, a libFuzzer input (or a kept text), as a kept text on stdout.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Weak: fuzz_npy defines neither (its inputs are .npy files, kept as they are), and they are null there.
extern "C" [[gnu::weak]] int AttncheckFuzzReplayKept(const uint8_t* data, size_t size, std::string* error);
extern "C" [[gnu::weak]] int AttncheckFuzzKeep(const uint8_t* data, size_t size, std::string* text, std::string* error);

namespace fs = std::filesystem;

namespace {

// The regular, non-hidden files named by `path`: itself, or those under it. Throws a one-line reason.
std::vector<fs::path> inputs(const fs::path& path) {
  if (fs::is_regular_file(path)) return {path};
  if (!fs::is_directory(path))
    throw std::runtime_error(fs::exists(path) ? "not a file or directory" : "no such file or directory");
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> contents(const fs::path& file) {
  if (!fs::is_regular_file(file)) throw std::runtime_error(fs::exists(file) ? "not a file" : "no such file");
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) throw std::runtime_error("cannot read");
  return bytes;
}

// The target's name: the program's, without "_replay".
std::string target_of(const std::string& program) {
  const std::string suffix = "_replay";
  return program.ends_with(suffix) ? program.substr(0, program.size() - suffix.size()) : program;
}

// The kept text of `bytes`, the reason it cannot be one thrown (one line).
std::string kept(const std::string& program, const std::vector<uint8_t>& bytes) {
  if (!AttncheckFuzzKeep)
    throw std::runtime_error(target_of(program) +
                             " has no kept texts: its inputs are files that mean the same "
                             "whatever the generator; keep the file itself");
  std::string text, error;
  if (AttncheckFuzzKeep(bytes.data(), bytes.size(), &text, &error) != 0) throw std::runtime_error(error);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = fs::path(argv[0]).filename().string();
  if (argc == 3 && std::string(argv[1]) == "--keep") {
    try {
      const std::string text = kept(program, contents(argv[2]));
      std::fputs(text.c_str(), stdout);
      return std::fflush(stdout) == 0 ? 0 : 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s: %s\n", program.c_str(), argv[2], e.what());
      return 2;
    }
  }
  if (argc < 2 || std::string(argv[1]).starts_with("-")) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY... | --keep FILE   (replays inputs; prints one as a kept text)\n",
                 program.c_str());
    return 2;
  }
  size_t count = 0;
  for (int a = 1; a < argc; ++a) {
    std::vector<fs::path> files;
    try {
      files = inputs(argv[a]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s: %s\n", program.c_str(), argv[a], e.what());
      return 2;
    }
    for (const fs::path& file : files) {
      std::vector<uint8_t> bytes;
      bool text = false;
      try {
        bytes = contents(file);
        text = attncheck::fuzz::is_kept_text(bytes.data(), bytes.size());
        if (text) kept(program, bytes);  // read before the path is printed, so that a malformed text is one line
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s: %s\n", program.c_str(), file.c_str(), e.what());
        return 2;
      }
      std::fprintf(stderr, "%s: %s\n", program.c_str(), file.c_str());
      if (text)
        AttncheckFuzzReplayKept(bytes.data(), bytes.size(), nullptr);
      else
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++count;
    }
  }
  std::fprintf(stderr, "%s: %zu inputs passed\n", program.c_str(), count);
  return 0;
}
