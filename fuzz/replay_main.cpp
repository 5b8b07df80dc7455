// The replay program of a fuzz target, built in every configuration (g++ or clang, no libFuzzer)
// so that no target can rot: runs LLVMFuzzerTestOneInput once on each file named and on every file
// under each directory named (sorted; hidden files such as .gitkeep skipped). A failing input
// aborts inside the target after its path was printed; exit 0 means every input passed, 2 a bad path.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

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

}  // namespace

int main(int argc, char** argv) {
  const std::string program = fs::path(argv[0]).filename().string();
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY... (replays fuzz inputs; docs/fuzzing.md)\n", program.c_str());
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
      std::ifstream in(file, std::ios::binary);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: %s: cannot read\n", program.c_str(), file.c_str());
        return 2;
      }
      std::fprintf(stderr, "%s: %s\n", program.c_str(), file.c_str());
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++count;
    }
  }
  std::fprintf(stderr, "%s: %zu inputs passed\n", program.c_str(), count);
  return 0;
}
