// The .npy reader and writer: round trips, the header forms NumPy writes, and every refusal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/npy.hpp"
#include "attncheck/precision.hpp"

namespace attncheck {
namespace {

using Bytes = std::vector<uint8_t>;

// A .npy file in format version `major`.0 with the header dict `dict` (unpadded) and `data`.
Bytes npy_file(const std::string& dict, const Bytes& data = {}, int major = 1) {
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(uint8_t(dict.size() >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A float32 header dict with the given shape text, as np.save writes it.
std::string f4_dict(const std::string& shape, const std::string& fortran_order = "False") {
  return "{'descr': '<f4', 'fortran_order': " + fortran_order + ", 'shape': " + shape + ", }";
}

// The bytes 0, 1, 2, ... (mod 256), or 0, 1, 0, 1, ... for bool data.
Bytes counting(size_t n, uint8_t modulus = 0) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = uint8_t(modulus ? i % modulus : i);
  return out;
}

// The raw (little-endian on this host) bytes of `values`.
Bytes float_bytes(const std::vector<float>& values) {
  Bytes out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Bytes per element, independently of the library's own table.
size_t itemsize(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::f64:
      return 8;
    case NpyDtype::f32:
    case NpyDtype::i32:
      return 4;
    case NpyDtype::f16:
    case NpyDtype::u16:
    case NpyDtype::i16:
      return 2;
    default:
      return 1;
  }
}

// parse_npy on the whole of `bytes`, named "in.npy".
NpyArray parse(const Bytes& bytes) { return parse_npy(bytes.data(), bytes.size(), "in.npy"); }

// The error parse_npy gives for `bytes` named "in.npy", or "" if they parsed.
std::string parse_error(const Bytes& bytes) {
  try {
    parse(bytes);
  } catch (const NpyError& e) {
    return e.what();
  }
  return "";
}

// A scratch file in GoogleTest's temporary directory.
std::string temp_path(const std::string& leaf) { return testing::TempDir() + "npy_test_" + leaf; }

// The whole content of the file at `path`.
Bytes file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Scalars, 1-4 dimensions and a zero-size array survive write_npy then read_npy unchanged.
TEST(Npy, RoundTripsEachDtypeAndShape) {
  const std::vector<int64_t> shapes[] = {{}, {5}, {2, 3}, {1, 2, 3, 4}, {2, 0}};
  const std::string path = temp_path("round_trip.npy");
  for (const NpyDtype dtype :
       {NpyDtype::f32, NpyDtype::f64, NpyDtype::u8, NpyDtype::b1, NpyDtype::i32, NpyDtype::f16, NpyDtype::u16, NpyDtype::i16}) {
    for (const auto& shape : shapes) {
      NpyArray array{dtype, shape, {}};
      array.data = counting(size_t(array.elements()) * itemsize(dtype), dtype == NpyDtype::b1 ? 2 : 0);
      write_npy(path, array);
      const NpyArray back = read_npy(path);
      EXPECT_EQ(back.dtype, dtype) << dtype_name(dtype);
      EXPECT_EQ(back.shape, shape) << dtype_name(dtype);
      EXPECT_EQ(back.data, array.data) << dtype_name(dtype);
    }
  }
}

// The exact dict np.save writes, space-padded to a '\n' so the data starts at a multiple of 64.
TEST(Npy, WritesNumPysHeaderWithTheDataAt64ByteAlignment) {
  const std::pair<std::vector<int64_t>, std::string> cases[] = {
      {{}, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"},
      {{5}, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"},
      {{2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
  };
  const std::string path = temp_path("header.npy");
  for (const auto& [shape, dict] : cases) {
    NpyArray array{NpyDtype::f32, shape, {}};
    array.data.resize(size_t(array.elements()) * 4);
    write_npy(path, array);
    const Bytes bytes = file_bytes(path);
    ASSERT_GE(bytes.size(), 64u);
    const size_t header_length = bytes[8] | bytes[9] << 8;
    const size_t data_start = 10 + header_length;
    EXPECT_EQ(Bytes(bytes.begin(), bytes.begin() + 8), Bytes({0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}));
    EXPECT_EQ(std::string(bytes.begin() + 10, bytes.begin() + 10 + dict.size()), dict);
    EXPECT_EQ(data_start % 64, 0u) << dict;
    EXPECT_EQ(bytes[data_start - 1], '\n') << dict;
    EXPECT_EQ(std::string(bytes.begin() + 10 + dict.size(), bytes.begin() + data_start - 1).find_first_not_of(' '),
              std::string::npos);
    EXPECT_EQ(bytes.size(), data_start + array.data.size());
  }
}

// Versions 2.0 and 3.0 differ from 1.0 only in their u32 header length.
TEST(Npy, ReadsVersion2And3Headers) {
  for (const int major : {2, 3}) {
    const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n";
    const NpyArray array = parse(npy_file(dict, counting(24), major));
    EXPECT_EQ(array.dtype, NpyDtype::f64);
    EXPECT_EQ(array.shape, std::vector<int64_t>{3});
    EXPECT_EQ(array.data, counting(24));
  }
}

// Key order, quotes, whitespace, trailing commas, "1L", zero-size shapes and byte-order marks.
TEST(Npy, ReadsEveryHeaderSpellingPythonAllows) {
  const std::pair<std::string, std::vector<int64_t>> cases[] = {
      {"{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}", {2}},
      {"  {  \"descr\" :'=f4',\t'fortran_order':False , 'shape':( 1 , 2 , ) , }  \n", {1, 2}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1L, 2L)}", {1, 2}},  // Python 2's NumPy
      {"{'descr': '<f4', 'fortran_order': True, 'shape': ()}", {}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}", {0, 3}},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 0, 2)}", {3, 0, 2}},
  };
  for (const auto& [dict, shape] : cases) {
    uint64_t elements = 1;
    for (const int64_t dim : shape) elements *= uint64_t(dim);
    const NpyArray array = parse(npy_file(dict, Bytes(elements * 4)));
    EXPECT_EQ(array.dtype, NpyDtype::f32) << dict;
    EXPECT_EQ(array.shape, shape) << dict;
  }
  for (const std::string descr : {"|u1", "<u1", "u1"}) {
    const std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': ()}";
    EXPECT_EQ(parse(npy_file(dict, {7})).dtype, NpyDtype::u8);
  }
  EXPECT_EQ(parse(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': ()}", {1})).dtype, NpyDtype::b1);
}

// float16 bit patterns [10], one of every kind of value (listed at Float16RoundTripsBitExactly).
const uint16_t kHalfBits[] = {0x0001, 0x03ff, 0x0400, 0x8000, 0x3c00, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d01};

// bits [n] -> their 2n bytes, little-endian as a '<' descr says.
Bytes little_endian(const uint16_t* bits, size_t n) {
  Bytes out(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = uint8_t(bits[i]);
    out[2 * i + 1] = uint8_t(bits[i] >> 8);
  }
  return out;
}

// '<f2' (np.float16): written as '<f2', read back bit for bit, and its values what binary16 says:
// the smallest and largest subnormal, the smallest normal, -0, 1, -65504, +-inf, a quiet NaN and a
// signaling one with a payload (which a hardware conversion would quiet).
TEST(Npy, Float16RoundTripsBitExactly) {
  const std::string path = temp_path("half.npy");
  const Bytes data = little_endian(kHalfBits, std::size(kHalfBits));
  write_npy(path, NpyArray{NpyDtype::f16, {2, 5}, data});
  const Bytes file = file_bytes(path);
  EXPECT_NE(std::string(file.begin(), file.end()).find("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 5), }"),
            std::string::npos);
  const NpyArray back = read_npy(path);
  EXPECT_EQ(back.dtype, NpyDtype::f16);
  EXPECT_EQ(back.shape, (std::vector<int64_t>{2, 5}));
  ASSERT_EQ(back.data, data);
  EXPECT_STREQ(dtype_name(back.dtype), "float16");

  auto value = [&](size_t n) {  // element n of back
    return Precision<Half>::to_double(Half{uint16_t(back.data[2 * n] | back.data[2 * n + 1] << 8)});
  };
  EXPECT_EQ(value(0), 0x1p-24);
  EXPECT_EQ(value(1), 0x3ffp-24);
  EXPECT_EQ(value(2), 0x1p-14);
  EXPECT_EQ(value(3), 0.0);
  EXPECT_TRUE(std::signbit(value(3)));
  EXPECT_EQ(value(4), 1.0);
  EXPECT_EQ(value(5), -65504.0);
  EXPECT_EQ(value(6), std::numeric_limits<double>::infinity());
  EXPECT_EQ(value(7), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(value(8)) && std::isnan(value(9)));
  EXPECT_EQ(Precision<Half>::from_double(value(9)).bits, 0x7d01);  // the signaling payload kept
}

// '<u2' and '<i2' (bfloat16 dumped by t.view(torch.uint16) or t.view(torch.int16)): the raw bits,
// unconverted; 0x3f80 is bfloat16's 1 and 0xc040 its -3. Both write back as they were read.
TEST(Npy, Uint16AndInt16ReadAsRawBits) {
  const uint16_t bits[] = {0x3f80, 0xc040, 0x7f80, 0x0001};
  const Bytes data = little_endian(bits, std::size(bits));
  for (const auto& [descr, dtype] : {std::pair{"<u2", NpyDtype::u16}, std::pair{"<i2", NpyDtype::i16}}) {
    const NpyArray array =
        parse(npy_file(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (4,), }", data));
    EXPECT_EQ(array.dtype, dtype) << descr;
    EXPECT_EQ(array.data, data) << descr;
    EXPECT_EQ(Precision<BFloat16>::to_double(BFloat16{uint16_t(array.data[0] | array.data[1] << 8)}), 1.0);
    EXPECT_EQ(Precision<BFloat16>::to_double(BFloat16{uint16_t(array.data[2] | array.data[3] << 8)}), -3.0);
    const std::string path = temp_path("bf16_bits.npy");
    write_npy(path, array);
    const Bytes file = file_bytes(path);
    EXPECT_NE(std::string(file.begin(), file.end()).find(std::string("'descr': '") + descr + "'"), std::string::npos);
    EXPECT_EQ(read_npy(path).data, data) << descr;
  }
}

// Element (i, j, k) of the Fortran-order test arrays: all distinct, so a misplaced one shows.
float element(int i, int j, int k) { return float(100 * i + 10 * j + k); }

// Column-major 2-D and 3-D float32 data comes back in row-major order.
TEST(Npy, TransposesFortranOrderIntoCOrder) {
  struct Case {
    std::string shape;
    int n0, n1, n2;
  } const cases[] = {{"(2, 3)", 2, 3, 1}, {"(2, 3, 4)", 2, 3, 4}};
  for (const Case& c : cases) {
    std::vector<float> fortran, c_order;
    for (int k = 0; k < c.n2; ++k)
      for (int j = 0; j < c.n1; ++j)
        for (int i = 0; i < c.n0; ++i) fortran.push_back(element(i, j, k));
    for (int i = 0; i < c.n0; ++i)
      for (int j = 0; j < c.n1; ++j)
        for (int k = 0; k < c.n2; ++k) c_order.push_back(element(i, j, k));
    const NpyArray array = parse(npy_file(f4_dict(c.shape, "True"), float_bytes(fortran)));
    EXPECT_EQ(array.data, float_bytes(c_order)) << c.shape;
  }
}

// A version 2.0 file whose header length field says `length`, with a small header after it.
Bytes with_header_length(uint32_t length) {
  Bytes file = npy_file(f4_dict("()"), Bytes(4), 2);
  for (int i = 0; i < 4; ++i) file[8 + i] = uint8_t(length >> (8 * i));
  return file;
}

// Each bad preamble, header, shape and data size: "in.npy: <specific phrase>" on one line.
TEST(Npy, EachFaultIsOneLineNamingTheFileAndTheProblem) {
  const Bytes valid = npy_file(f4_dict("(2,)"), Bytes(8));
  Bytes bad_magic = valid, version_4 = valid, version_1_5 = valid;
  bad_magic[1] = 'X';
  version_4[6] = 4;
  version_1_5[7] = 5;
  const std::string u1_huge = "{'descr': '|u1', 'fortran_order': False, 'shape': (2147483648,)}";
  const std::pair<Bytes, std::string> cases[] = {
      {{}, "not a .npy file"},
      {bad_magic, "not a .npy file"},
      {Bytes(valid.begin(), valid.begin() + 7), "truncated: the file ends inside the format version"},
      {Bytes(valid.begin(), valid.begin() + 9), "truncated: the file ends inside the header length"},
      {version_4, "unsupported .npy format version 4.0"},
      {version_1_5, "unsupported .npy format version 1.5"},
      {with_header_length((1u << 20) + 1), "header length 1048577 exceeds the 1 MiB limit"},
      {with_header_length(0xffffffffu), "header length 4294967295 exceeds the 1 MiB limit"},
      {with_header_length(500), "header length 500 runs past the end of the file"},
      {npy_file("{'descr': '<f4', 'shape': (2,)}", Bytes(8)), "header has no 'fortran_order' key"},
      {npy_file("{'descr': '<f4', 'fortran_order': False}"), "header has no 'shape' key"},
      {npy_file("{'fortran_order': False, 'shape': ()}"), "header has no 'descr' key"},
      {npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': ()}"), "unsupported dtype '<i8'"},
      {npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': ()}"),
       "unsupported dtype '>f4' (need float32, float64, float16, int32, int16, uint16, bool or uint8, little-endian)"},
      {npy_file("{'descr': '>f2', 'fortran_order': False, 'shape': ()}"), "unsupported dtype '>f2'"},
      {npy_file("{'descr': '>u2', 'fortran_order': False, 'shape': ()}"), "unsupported dtype '>u2'"},
      {npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': ()}"), "unsupported dtype '<c8'"},
      {npy_file("{'descr': '|O', 'fortran_order': False, 'shape': ()}"), "unsupported dtype '|O'"},
      {npy_file("{'descr': 'x\ny', 'fortran_order': False, 'shape': ()}"), "unsupported dtype 'x\\x0ay'"},
      {npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}"), "structured dtypes are not supported"},
      {npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}"), "True or False"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}"), "unexpected key 'extra'"},
      {npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"), "repeats the key 'descr'"},
      {npy_file("{'descr': '<f4' 'fortran_order': False, 'shape': ()}"), "expects ',' or '}' after a value"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x"), "text after the closing '}'"},
      {npy_file("{'descr"), "unterminated string"},
      {npy_file(f4_dict("(3)")), "'shape' (3) is not a tuple"},
      {npy_file(f4_dict("(2, -3)")), "negative dimension -3"},
      {npy_file(f4_dict("(2.5,)")), "dimension '2.5' is not an integer"},
      {npy_file(f4_dict("(None,)")), "dimension 'None' is not an integer"},
      {npy_file(f4_dict("(2,, 3)")), "expects a dimension"},
      {npy_file(f4_dict("(1, 1, 1, 1, 1, 1, 1, 1, 1)")), "more than 8 dimensions"},
      {npy_file(f4_dict("(65536, 65536)")), "shape (65536, 65536) is absurdly large"},
      {npy_file(f4_dict("(2147483649,)")), "shape (2147483649,) is absurdly large"},
      {npy_file(f4_dict("(0, 99999999999999999999999)")), "is absurdly large"},
      {npy_file(u1_huge), "truncated: shape (2147483648,) needs 2147483648 bytes of data, file has 0"},
      {npy_file(f4_dict("(2, 3)"), Bytes(20)), "truncated: shape (2, 3) needs 24 bytes of data, file has 20"},
      {npy_file(f4_dict("(2, 3)"), Bytes(25)), "extra data: shape (2, 3) needs 24 bytes of data, file has 25"},
  };
  for (const auto& [bytes, phrase] : cases) {
    const std::string error = parse_error(bytes);
    EXPECT_EQ(error.rfind("in.npy: ", 0), 0u) << phrase << " -> " << error;
    EXPECT_NE(error.find(phrase), std::string::npos) << phrase << " -> " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

// The error `action` throws, or "" if it throws none.
template <class Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const NpyError& e) {
    return e.what();
  }
  return "";
}

// Unopenable, non-regular, bad and unwritable files, and inconsistent arrays, named by path.
TEST(Npy, FileFaultsNameThePath) {
  EXPECT_EQ(error_of([] { read_npy("/nonexistent/a.npy"); }), "/nonexistent/a.npy: cannot open (No such file or directory)");
  EXPECT_EQ(error_of([] { read_npy(testing::TempDir()); }), testing::TempDir() + ": cannot open (Is a directory)");
  EXPECT_EQ(error_of([] { read_npy("/dev/zero"); }), "/dev/zero: cannot open (not a regular file)");

  const std::string path = temp_path("truncated.npy");
  const Bytes truncated = npy_file(f4_dict("(2, 3)"), Bytes(20));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(truncated.data()), truncated.size());
  EXPECT_EQ(error_of([&] { read_npy(path); }), path + ": truncated: shape (2, 3) needs 24 bytes of data, file has 20");

  const NpyArray short_data{NpyDtype::f32, {2, 3}, Bytes(20)};
  EXPECT_EQ(error_of([&] { write_npy(path, short_data); }), path + ": data has 20 bytes, shape (2, 3) of float32 needs 24");
  const NpyArray negative{NpyDtype::u8, {-1}, {}}, scalar{NpyDtype::u8, {}, {0}};
  EXPECT_NE(error_of([&] { write_npy(path, negative); }).find("negative dimension -1"), std::string::npos);
  EXPECT_EQ(error_of([&] { write_npy("/nonexistent/a.npy", scalar); }),
            "/nonexistent/a.npy: cannot open for writing (No such file or directory)");
}

// Damaged copies of a valid Fortran-order file: each must parse or give an NpyError, never crash.
TEST(Npy, RandomlyDamagedFilesParseOrFailCleanly) {
  const Bytes valid = npy_file(f4_dict("(2, 3, 2)", "True"), counting(48));
  const std::string header_chars = "0123456789(),:' {}-LTrueFalse<|=fub";  // likelier to reach deep parser states
  std::mt19937_64 rng(20240611);
  for (int round = 0; round < 20000; ++round) {
    Bytes bytes = valid;
    for (int edits = 1 + int(rng() % 4); edits > 0; --edits) {
      const size_t at = rng() % (bytes.size() + 1);
      const uint8_t byte = rng() % 2 ? uint8_t(rng()) : uint8_t(header_chars[rng() % header_chars.size()]);
      switch (rng() % 8) {
        case 0:
          bytes.resize(at);
          break;
        case 1:
          bytes.insert(bytes.begin() + at, byte);
          break;
        case 2:
          if (at < bytes.size()) bytes.erase(bytes.begin() + at);
          break;
        default:
          if (at < bytes.size()) bytes[at] = byte;
      }
    }
    try {
      const NpyArray array = parse(bytes);
      EXPECT_EQ(array.data.size(), size_t(array.elements()) * itemsize(array.dtype));
    } catch (const NpyError& e) {
      ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      FAIL() << "round " << round << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace attncheck
