// fuzz_npy checks the .npy reader (tools/, parse_npy) on any bytes: it returns an array or throws
// NpyError whose message is one line starting with the input's name; never a crash, an out-of-bounds
// read, another exception or an allocation beyond the input's size (fuzz_npy.options caps single
// allocations at 64 MB). A returned array is consistent: at most 8 dimensions, and exactly
// elements x itemsize bytes of data, no more than the input held.
#include <cstdint>
#include <cstdio>
#include <string>

#include "attncheck/npy.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attncheck;
  try {
    const NpyArray array = parse_npy(data, size, "input");
    if (fuzz::showing())
      std::fprintf(stderr, "input: %s, %zu dimensions, %lld elements\n", dtype_name(array.dtype), array.shape.size(),
                   (long long)array.elements());
    const size_t itemsize = npy_itemsize(array.dtype);
    if (array.shape.size() > 8 || array.data.size() > size || array.data.size() != size_t(array.elements()) * itemsize)
      fuzz::finding("parse_npy returned an inconsistent array: " + std::to_string(array.shape.size()) + " dimensions, " +
                    std::to_string(array.elements()) + " elements of " + dtype_name(array.dtype) + ", " +
                    std::to_string(array.data.size()) + " data bytes from a " + std::to_string(size) + "-byte input");
  } catch (const NpyError& e) {
    const std::string message = e.what();
    if (fuzz::showing()) std::fprintf(stderr, "%s\n", message.c_str());
    if (message.rfind("input: ", 0) != 0 || message.find('\n') != std::string::npos)
      fuzz::finding("parse_npy's error is not one line naming the input: " + message);
  }
  return 0;
}
