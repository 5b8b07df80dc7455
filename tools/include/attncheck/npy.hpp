// Reading and writing NumPy .npy files (format versions 1.0-3.0) for `attncheck compare`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace attncheck {

// The element types attncheck exchanges. Files say '<f4', '<f8', '<f2', '|u1', '|b1', '<i4', '<u2',
// '<i2'; '=' and a missing byte-order mark are accepted only for one-byte types or when this host is
// little-endian. NumPy has no bfloat16, so bf16 tensors arrive as u16 or i16 bit patterns, which
// only the reader of a file can tell from integers.
enum class NpyDtype { f32, f64, u8, b1, i32, f16, u16, i16 };

// An array as stored in a .npy file, always in C (row-major) order.
struct NpyArray {
  NpyDtype dtype;
  std::vector<int64_t> shape;       // empty = scalar
  std::vector<unsigned char> data;  // raw little-endian element bytes, C (row-major) order
  // Product of shape (1 for a scalar); meaningful for shapes with non-negative dimensions.
  int64_t elements() const;
};

// Every reading or writing fault: one line, "NAME: reason".
struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses the `size` bytes of a .npy file; `name` prefixes every error: "NAME: reason" on one
// line. The whole file must be exactly the header plus the data its shape needs; Fortran-order
// data is transposed into C order.
NpyArray parse_npy(const uint8_t* bytes, size_t size, const std::string& name);

// Reads a regular file; a missing/unreadable file is an NpyError "PATH: cannot open (reason)", and
// so is a FIFO or device (never waited on). Memory is allocated only after the header has been
// checked against the file's size.
NpyArray read_npy(const std::string& path);
// Its header alone (data empty), checked as read_npy checks it: to check that files fit together
// before any of their data is read.
NpyArray read_npy_header(const std::string& path);

// Writes format version 1.0 (C order), the data starting at a multiple of 64 bytes as NumPy
// does; throws NpyError if the array is inconsistent or the file cannot be written.
void write_npy(const std::string& path, const NpyArray& array);

// Bytes per element: 8, 4, 2 or 1.
size_t npy_itemsize(NpyDtype dtype);

// NumPy's name: "float32", "float64", "float16", "uint8", "bool", "int32", "uint16", "int16".
const char* dtype_name(NpyDtype);

}  // namespace attncheck
