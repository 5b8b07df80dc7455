#include "attncheck/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "attncheck/printable.hpp"

namespace attncheck {
namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kMaxPreamble = 12;             // magic, version, u32 header length (v2/v3)
constexpr size_t kMaxHeader = size_t(1) << 20;  // a real header is ~100 bytes; NumPy itself stops at 10000
constexpr size_t kMaxDims = 8;
constexpr int64_t kMaxElements = int64_t(1) << 31;
constexpr bool kHostLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

}  // namespace

size_t npy_itemsize(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::f32:
      return 4;
    case NpyDtype::i32:
      return 4;
    case NpyDtype::f64:
      return 8;
    case NpyDtype::f16:
    case NpyDtype::u16:
    case NpyDtype::i16:
      return 2;
    default:
      return 1;
  }
}

namespace {

// The descr write_npy puts in the header, as np.save would.
const char* descr(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::f32:
      return "<f4";
    case NpyDtype::f64:
      return "<f8";
    case NpyDtype::u8:
      return "|u1";
    case NpyDtype::i32:
      return "<i4";
    case NpyDtype::f16:
      return "<f2";
    case NpyDtype::u16:
      return "<u2";
    case NpyDtype::i16:
      return "<i2";
    default:
      return "|b1";
  }
}

// Dimensions' decimal text as NumPy prints a shape: "()", "(5,)", "(2, 3)".
std::string shape_text(const std::vector<std::string>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + printable(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

// Non-negative dimensions given as digit strings (of any length) -> the shape, refusing more than
// 2^31 elements so that no later size computation can overflow or ask for absurd memory.
std::vector<int64_t> checked_shape(const std::vector<std::string>& dims, const std::string& name) {
  std::vector<int64_t> shape;
  int64_t elements = 1;
  bool absurd = false;
  for (const std::string& text : dims) {
    const std::string digits = text.substr(std::min(text.find_first_not_of('0'), text.size() - 1));
    const int64_t dim = digits.size() > 10 ? kMaxElements + 1 : std::stoll(digits);
    absurd = absurd || dim > kMaxElements;
    elements = std::min(elements, kMaxElements + 1) * std::min(dim, kMaxElements + 1);  // both <= 2^31+1: no overflow
    shape.push_back(dim);
  }
  if (absurd || elements > kMaxElements)
    throw NpyError(name + ": shape " + shape_text(dims) + " is absurdly large (more than 2^31 elements)");
  return shape;
}

// What the header says, checked, plus where the data lies in the file.
struct Header {
  NpyDtype dtype;
  std::vector<int64_t> shape;
  std::string shape_text;
  bool fortran_order;
  size_t data_offset;
  uint64_t data_bytes;
};

// Maps a descr such as '<f4' to a dtype: little-endian multi-byte types ('=' or no mark only on a little-endian
// host, where NumPy reads them as little-endian too) and one-byte types with any byte-order mark.
NpyDtype parse_descr(std::string_view text, const std::string& name) {
  const bool marked = !text.empty() && std::string_view("<>|=").find(text[0]) != std::string_view::npos;
  const char order = marked ? text[0] : '=';
  const std::string_view type = text.substr(marked ? 1 : 0);
  const bool little = order == '<' || (order == '=' && kHostLittleEndian);
  if (type == "u1") return NpyDtype::u8;
  if (type == "b1") return NpyDtype::b1;
  if (type == "f4" && little) return NpyDtype::f32;
  if (type == "f8" && little) return NpyDtype::f64;
  if (type == "i4" && little) return NpyDtype::i32;
  if (type == "f2" && little) return NpyDtype::f16;
  if (type == "u2" && little) return NpyDtype::u16;
  if (type == "i2" && little) return NpyDtype::i16;
  throw NpyError(name + ": unsupported dtype '" + printable(text) +
                 "' (need float32, float64, float16, int32, int16, uint16, bool or uint8, little-endian)");
}

// The header dict, a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// read by hand: keys in any order, whitespace and trailing commas allowed, anything else refused.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  // Fills descr, fortran_order and the shape's dimension text (each a non-negative digit string).
  void parse(std::string& descr, bool& fortran_order, std::vector<std::string>& dims) {
    bool seen[3] = {false, false, false};
    expect('{', "at the start of the header");
    for (skip_space(); !take('}'); skip_space()) {
      const std::string_view key = quoted("a quoted key");
      const int which = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (which < 0) fail("has an unexpected key '" + printable(key) + "'");
      if (seen[which]) fail("repeats the key '" + std::string(key) + "'");
      seen[which] = true;
      expect(':', "after a key");
      if (which == 0) descr = quoted("a quoted dtype string after 'descr' (structured dtypes are not supported)");
      if (which == 1) fortran_order = boolean();
      if (which == 2) dims = tuple();
      skip_space();
      if (!take(',') && peek() != '}') fail("expects ',' or '}' after a value, found " + found());
    }
    skip_space();
    if (pos_ != text_.size()) fail("has text after the closing '}', found " + found());
    const char* const keys[] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; ++i)
      if (!seen[i]) fail("has no '" + std::string(keys[i]) + "' key");
  }

 private:
  // Every grammar fault: "NAME: header <why>".
  [[noreturn]] void fail(const std::string& why) const { throw NpyError(name_ + ": header " + why); }

  // The next character, or '\0' at the end of the header (never read past it).
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  // Consumes `c` if it is next.
  bool take(char c) { return pos_ < text_.size() && text_[pos_] == c ? (++pos_, true) : false; }
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
  // Python allows whitespace between tokens; NumPy pads with spaces and ends with '\n'.
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  // What is at the current position, for messages: "'x' at byte 12" or "the end of the header".
  std::string found() const {
    return pos_ < text_.size() ? "'" + printable(text_.substr(pos_, 1)) + "' at byte " + std::to_string(pos_)
                               : "the end of the header";
  }
  // Consumes `c` after optional whitespace, or fails saying what was there instead.
  void expect(char c, const char* where) {
    skip_space();
    if (!take(c)) fail("expects '" + std::string(1, c) + "' " + where + ", found " + found());
  }

  // 'text' or "text"; no escapes, since no valid key or dtype has a backslash or quote in it.
  std::string_view quoted(const char* what) {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expects " + std::string(what) + ", found " + found());
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("has an unterminated string at byte " + std::to_string(pos_));
    const std::string_view s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }

  // True or False as whole words ("Truex" is refused).
  bool boolean() {
    skip_space();
    for (const bool value : {true, false}) {
      const std::string_view word = value ? "True" : "False";
      const char after = pos_ + word.size() < text_.size() ? text_[pos_ + word.size()] : '\0';
      if (text_.substr(pos_, word.size()) == word && !std::isalnum(static_cast<unsigned char>(after)) && after != '_') {
        pos_ += word.size();
        return value;
      }
    }
    fail("expects True or False after 'fortran_order', found " + found());
  }

  // "()", "(3,)", "(2, 3)", "(2, 3,)"; Python 2's "3L" longs are accepted since old NumPy wrote them.
  std::vector<std::string> tuple() {
    expect('(', "to open 'shape'");
    std::vector<std::string> dims;
    bool comma = false;  // a one-element tuple needs its comma: "(3)" is the number 3 in Python
    for (skip_space(); !take(')'); skip_space()) {
      const size_t start = pos_;
      while (pos_ < text_.size() && !is_space(text_[pos_]) && text_[pos_] != ',' && text_[pos_] != ')') ++pos_;
      std::string_view dim = text_.substr(start, pos_ - start);
      if (dim.empty()) fail("expects a dimension in 'shape', found " + found());
      if (dim.size() > 1 && (dim.back() == 'L' || dim.back() == 'l')) dim.remove_suffix(1);
      const bool negative = dim[0] == '-' && dim.size() > 1;
      if (dim.substr(negative).find_first_not_of("0123456789") != std::string_view::npos)
        fail("'shape' dimension '" + printable(dim) + "' is not an integer");
      if (negative) fail("'shape' has a negative dimension " + printable(dim));
      if (dims.size() == kMaxDims) fail("'shape' has more than " + std::to_string(kMaxDims) + " dimensions");
      dims.emplace_back(dim);
      skip_space();
      comma = take(',');
      if (!comma && peek() != ')') fail("expects ',' or ')' in 'shape', found " + found());
    }
    if (dims.size() == 1 && !comma)
      fail("'shape' (" + printable(dims[0]) + ") is not a tuple; a 1-d shape is written with a comma");
    return dims;
  }

  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
};

// The preamble and header dict at the start of a file of `file_size` bytes, whose first `available`
// bytes are at `bytes` (at least the header's worth when the file has it); checks the data size too.
Header parse_header(const uint8_t* bytes, size_t available, uint64_t file_size, const std::string& name) {
  if (available < sizeof kMagic || std::memcmp(bytes, kMagic, sizeof kMagic) != 0)
    throw NpyError(name + ": not a .npy file (no \\x93NUMPY magic at the start)");
  if (available < 8) throw NpyError(name + ": truncated: the file ends inside the format version");
  const int major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw NpyError(name + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (need 1.0, 2.0 or 3.0)");
  // v1 has a u16 header length, v2 and v3 (utf8 header, read like v2 since ours is ASCII) a u32.
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (available < 8 + length_bytes) throw NpyError(name + ": truncated: the file ends inside the header length");
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) header_length |= uint64_t(bytes[8 + i]) << (8 * i);
  if (header_length > kMaxHeader)
    throw NpyError(name + ": header length " + std::to_string(header_length) + " exceeds the 1 MiB limit");
  const size_t start = 8 + length_bytes;
  if (start + header_length > file_size)
    throw NpyError(name + ": header length " + std::to_string(header_length) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)");

  std::string descr_text;
  std::vector<std::string> dims;
  Header h{};
  const std::string_view text(reinterpret_cast<const char*>(bytes) + start, header_length);
  DictParser(text, name).parse(descr_text, h.fortran_order, dims);
  h.dtype = parse_descr(descr_text, name);
  h.shape = checked_shape(dims, name);
  h.shape_text = shape_text(dims);
  h.data_offset = start + header_length;

  uint64_t elements = 1;
  for (const int64_t dim : h.shape) elements *= uint64_t(dim);
  h.data_bytes = elements * npy_itemsize(h.dtype);
  const uint64_t have = file_size - h.data_offset;
  if (have != h.data_bytes)
    throw NpyError(name + (have < h.data_bytes ? ": truncated: shape " : ": extra data: shape ") + h.shape_text + " needs " +
                   std::to_string(h.data_bytes) + " bytes of data, file has " + std::to_string(have));
  return h;
}

// Column-major `data` of `shape` (itemsize bytes per element) -> the same array in row-major order:
// walks the output in C order with an odometer over the indices, tracking the Fortran offset.
std::vector<unsigned char> fortran_to_c(const std::vector<unsigned char>& data, const std::vector<int64_t>& shape,
                                        size_t itemsize) {
  const size_t ndim = shape.size();
  std::vector<size_t> stride(ndim), index(ndim, 0);
  for (size_t k = 0, s = itemsize; k < ndim; s *= size_t(shape[k]), ++k) stride[k] = s;
  std::vector<unsigned char> out(data.size());
  size_t from = 0;
  for (size_t to = 0; to < out.size(); to += itemsize) {
    std::memcpy(&out[to], &data[from], itemsize);
    for (size_t k = ndim; k-- > 0;) {
      from += stride[k];
      if (++index[k] < size_t(shape[k])) break;
      from -= stride[k] * index[k];
      index[k] = 0;
    }
  }
  return out;
}

// The checked header and its data bytes (in the file's order) -> an array in C order.
NpyArray to_array(Header&& h, std::vector<unsigned char>&& data) {
  if (h.fortran_order && h.shape.size() > 1) data = fortran_to_c(data, h.shape, npy_itemsize(h.dtype));
  return NpyArray{h.dtype, std::move(h.shape), std::move(data)};
}

// Reads exactly `size` bytes at `offset` of `fd` into `out`, retrying short reads.
void read_at(int fd, unsigned char* out, size_t size, uint64_t offset, const std::string& path) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, out + done, size - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw NpyError(path + ": read failed (" + std::strerror(errno) + ")");
    if (n == 0) throw NpyError(path + ": read failed (the file shrank while being read)");
    done += size_t(n);
  }
}

}  // namespace

// Product of the dimensions; 1 for a scalar, 0 if any dimension is 0.
int64_t NpyArray::elements() const {
  uint64_t n = 1;  // unsigned, so a bogus shape wraps instead of being undefined behaviour
  for (const int64_t dim : shape) n *= uint64_t(dim);
  return int64_t(n);
}

// NumPy's name for each dtype, for messages.
const char* dtype_name(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::f32:
      return "float32";
    case NpyDtype::f64:
      return "float64";
    case NpyDtype::u8:
      return "uint8";
    case NpyDtype::i32:
      return "int32";
    case NpyDtype::f16:
      return "float16";
    case NpyDtype::u16:
      return "uint16";
    case NpyDtype::i16:
      return "int16";
    default:
      return "bool";
  }
}

// Whole-file bytes in memory: the header must fit and the data must be exactly what the shape needs.
NpyArray parse_npy(const uint8_t* bytes, size_t size, const std::string& name) {
  Header h = parse_header(bytes, size, size, name);
  std::vector<unsigned char> data(bytes + h.data_offset, bytes + size);
  return to_array(std::move(h), std::move(data));
}

namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A regular file opened and its header checked against its size: reads at most the preamble and a
// 1 MiB header. Opened without blocking, so that a FIFO is refused rather than waited on.
Header open_npy(const std::string& path, Fd& file) {
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd < 0) throw NpyError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw NpyError(path + ": cannot open (" + std::strerror(errno) + ")");
  // A pipe or device has no size to check the header against and might never end.
  if (S_ISDIR(st.st_mode)) throw NpyError(path + ": cannot open (" + std::strerror(EISDIR) + ")");
  if (!S_ISREG(st.st_mode)) throw NpyError(path + ": cannot open (not a regular file)");
  const uint64_t size = uint64_t(st.st_size);
  std::vector<unsigned char> head(std::min<uint64_t>(size, kMaxPreamble + kMaxHeader));
  read_at(file.fd, head.data(), head.size(), 0, path);
  return parse_header(head.data(), head.size(), size, path);
}

}  // namespace

NpyArray read_npy_header(const std::string& path) {
  Fd file{-1};
  Header h = open_npy(path, file);
  return NpyArray{h.dtype, std::move(h.shape), {}};
}

// Memory for the data only once the header's shape has been checked against the file's size.
NpyArray read_npy(const std::string& path) {
  Fd file{-1};
  Header h = open_npy(path, file);
  std::vector<unsigned char> data(h.data_bytes);
  read_at(file.fd, data.data(), data.size(), h.data_offset, path);
  return to_array(std::move(h), std::move(data));
}

// Any array whose shape has at most 8 non-negative dimensions, at most 2^31 elements, and exactly
// elements * itemsize data bytes; anything else is refused rather than written unreadable.
void write_npy(const std::string& path, const NpyArray& array) {
  std::vector<std::string> dims;
  for (const int64_t dim : array.shape) {
    if (dim < 0) throw NpyError(path + ": cannot write a negative dimension " + std::to_string(dim));
    dims.push_back(std::to_string(dim));
  }
  if (dims.size() > kMaxDims) throw NpyError(path + ": cannot write more than " + std::to_string(kMaxDims) + " dimensions");
  checked_shape(dims, path);
  const uint64_t need = uint64_t(array.elements()) * npy_itemsize(array.dtype);
  if (array.data.size() != need)
    throw NpyError(path + ": data has " + std::to_string(array.data.size()) + " bytes, shape " + shape_text(dims) + " of " +
                   dtype_name(array.dtype) + " needs " + std::to_string(need));

  std::string header =
      std::string("{'descr': '") + descr(array.dtype) + "', 'fortran_order': False, 'shape': " + shape_text(dims) + ", }";
  // NumPy pads with 1 to 64 spaces and a final '\n' so that the data starts 64-byte aligned;
  // padding exactly as it does keeps our files byte-identical to np.save's.
  const size_t unpadded = 10 + header.size() + 1;
  header.append(64 - unpadded % 64, ' ');
  header += '\n';
  const unsigned char preamble[10] = {0x93,
                                      'N',
                                      'U',
                                      'M',
                                      'P',
                                      'Y',
                                      1,
                                      0,
                                      static_cast<unsigned char>(header.size()),
                                      static_cast<unsigned char>(header.size() >> 8)};

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw NpyError(path + ": cannot open for writing (" + std::strerror(errno) + ")");
  errno = 0;
  bool ok = std::fwrite(preamble, 1, sizeof preamble, f) == sizeof preamble &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(array.data.data(), 1, array.data.size(), f) == array.data.size();
  int error = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {  // buffered data may fail only here (disk full)
    ok = false;
    error = errno;
  }
  if (!ok) {
    std::remove(path.c_str());  // a half-written file would only fail later, far from the cause
    throw NpyError(path + ": write failed (" + std::strerror(error ? error : EIO) + ")");
  }
}

}  // namespace attncheck
