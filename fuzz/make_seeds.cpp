// make_seeds DIR: writes the seed inputs of the fuzz targets as DIR/<target>/<name>; fuzz/seeds.sh
// files them in corpus/<target>/ under the sha1 of their content. A numeric seed is found, not
// hand-encoded: over seeds 1, 2, ... of a SeededChooser, the first stream of choices that the
// target's own reader decodes into a row or case with the wanted feature (a fully masked row,
// extreme logits...) is recorded and written as the bytes BytesChooser reads back as those choices.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attncheck/npy.hpp"
#include "fuzz_input.hpp"

namespace fs = std::filesystem;
using namespace attncheck;
using namespace attncheck::fuzz;

namespace {

// Passes another chooser's choices through and records each as (value, n).
struct Recorder : Chooser {
  explicit Recorder(Chooser& from) : inner(from) {}
  uint64_t below(uint64_t n) override {
    const uint64_t value = inner.below(n);
    if (n > 1) picks.emplace_back(value, n);
    return value;
  }
  Chooser& inner;
  std::vector<std::pair<uint64_t, uint64_t>> picks;
};

// The input BytesChooser reads as `picks`: each value in the fewest bytes that hold n - 1, most
// significant first, laid out from the end of the input backwards.
std::string encode(const std::vector<std::pair<uint64_t, uint64_t>>& picks) {
  std::string read_order;
  for (const auto& [value, n] : picks) {
    int bytes = 0;
    for (uint64_t range = n - 1; range != 0; range >>= 8) ++bytes;
    for (int k = bytes - 1; k >= 0; --k) read_order += char(value >> (8 * k));
  }
  return std::string(read_order.rbegin(), read_order.rend());
}

// The smallest encoding among the first inputs for which read(chooser) -> bool holds, over seeds
// 1..20000 (read decodes with the target's reader and tests the feature); checked by decoding it back.
template <class Read>
std::string find(const std::string& what, Read read) {
  std::string best;
  for (uint64_t seed = 1, found = 0; seed <= 20000 && found < 20; ++seed) {
    SeededChooser random(seed);
    Recorder recorder(random);
    if (!read(recorder)) continue;
    ++found;
    const std::string bytes = encode(recorder.picks);
    BytesChooser replay(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    Recorder check(replay);
    if (!read(check) || check.picks != recorder.picks)
      throw std::runtime_error("seed '" + what + "' does not decode back to its own choices");
    if (best.empty() || bytes.size() < best.size()) best = bytes;
  }
  if (best.empty()) throw std::runtime_error("no seed stream gives '" + what + "'");
  return best;
}

void write(const fs::path& file, const std::string& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << bytes;
  if (!out.flush()) throw std::runtime_error(file.string() + ": cannot write");
}

// A softmax row's feature, tested on the decoded row of either precision.
template <class Want>
void softmax_seed(const fs::path& dir, const std::string& name, Want want) {
  write(dir / "fuzz_softmax" / name, find(name, [&](Chooser& choose) {
          bool ok = false;
          read_softmax_input(choose, [&](const auto& row) { ok = want(row); });
          return ok;
        }));
}

// An attention input's feature, tested on the decoded input of either precision.
template <class Want>
void attention_seed(const fs::path& dir, const std::string& name, Want want) {
  write(dir / "fuzz_attention" / name, find(name, [&](Chooser& choose) {
          bool ok = false;
          read_attention_input(choose, kAttentionLimits, true, [&](const auto& in) { ok = want(in); });
          return ok;
        }));
}

// Whether query i of batch b has no key it may see.
template <class T>
bool empty_row(const Case<T>& c, int64_t b, int64_t i) {
  for (int64_t j = 0; j < c.shape.Tk; ++j)
    if (c.permits(b, i, j)) return false;
  return true;
}

void softmax_seeds(const fs::path& dir) {
  softmax_seed(dir, "extreme_logits", [](const auto& row) {
    int extreme = 0;
    for (size_t j = 0; j < row.logits.size(); ++j) {
      if (!row.permitted(j)) continue;
      if (!std::isfinite(row.logits[j])) return false;
      extreme += std::fabs(row.logits[j]) >= 88;
    }
    return extreme >= 2 && row.logits.size() >= 4;
  });
  softmax_seed(dir, "fully_masked", [](const auto& row) {
    for (size_t j = 0; j < row.logits.size(); ++j)
      if (row.permitted(j)) return false;
    return row.logits.size() >= 4;
  });
  softmax_seed(dir, "nan_permitted", [](const auto& row) {
    for (size_t j = 0; j < row.logits.size(); ++j)
      if (row.permitted(j) && std::isnan(row.logits[j])) return row.logits.size() >= 3;
    return false;
  });
  softmax_seed(dir, "poison_forbidden", [](const auto& row) {
    bool poison = false;
    for (size_t j = 0; j < row.logits.size(); ++j) {
      if (row.permitted(j) && !std::isfinite(row.logits[j])) return false;
      poison |= !row.permitted(j) && !std::isfinite(row.logits[j]) && row.logits[j] != -INFINITY;
    }
    return poison && row.logits.size() >= 3;
  });
  softmax_seed(dir, "subnormal", [](const auto& row) {
    bool subnormal = false;
    for (size_t j = 0; j < row.logits.size(); ++j) {
      if (row.permitted(j) && !std::isfinite(row.logits[j])) return false;
      subnormal |= row.permitted(j) && std::fpclassify(row.logits[j]) == FP_SUBNORMAL;
    }
    return subnormal;
  });
}

void attention_seeds(const fs::path& dir) {
  attention_seed(dir, "wide_logits", [](const auto& in) { return in.c.mix.rfind("qk wide", 0) == 0 && in.c.shape.Tk >= 3; });
  attention_seed(dir, "arbitrary_bits", [](const auto& in) { return in.c.mix.rfind("qk bits", 0) == 0; });
  attention_seed(dir, "fully_masked_row", [](const auto& in) {
    return in.c.shape.Tk >= 2 && empty_row(in.c, 0, 0) && !empty_row(in.c, 0, in.c.shape.Tq - 1);
  });
  attention_seed(dir, "lower_right_tq_over_tk", [](const auto& in) {
    return in.c.causal == Causal::lower_right && in.c.shape.Tq > in.c.shape.Tk && in.c.allow.empty();
  });
  attention_seed(dir, "upper_left_tq_under_tk", [](const auto& in) {
    return in.c.causal == Causal::upper_left && in.c.shape.Tq < in.c.shape.Tk && in.c.allow.empty();
  });
  attention_seed(dir, "key_padding_and_mask", [](const auto& in) {
    return in.c.mix.find("allow mask, key lengths") != std::string::npos && in.c.shape.B == 2;
  });
  // Two KV heads or more, each read by two query heads or more: where a head mapping of h % H_kv
  // differs from h / (H / H_kv) (the corpus must catch gqa_heads_interleaved whatever the generator's order).
  attention_seed(dir, "grouped_kv_heads", [](const auto& in) {
    const Shape& s = in.c.shape;
    return s.kv_heads() >= 2 && s.H / s.kv_heads() >= 2 && in.c.mix.rfind("qk normal, v normal", 0) == 0 && in.c.allow.empty();
  });
  attention_seed(dir, "bias_nan_policy_double", [](const auto& in) {
    const bool f64 = std::is_same_v<std::decay_t<decltype(in.c.q[0])>, double>;
    return f64 && !in.c.bias.empty() && in.c.empty_rows == EmptyRows::nan;
  });
}

// np.save's files as write_npy makes them, and two it does not: Fortran order and format 2.0.
void npy_seeds(const fs::path& dir) {
  const fs::path out = dir / "fuzz_npy";
  fs::create_directories(out);
  auto bytes_of = [](std::vector<float> values) {
    std::vector<unsigned char> data(values.size() * sizeof(float));
    std::memcpy(data.data(), values.data(), data.size());
    return data;
  };
  write_npy((out / "f32_2x3.npy").string(), {NpyDtype::f32, {2, 3}, bytes_of({1, -2, 3.5f, 0, INFINITY, NAN})});
  write_npy((out / "f64_scalar.npy").string(), {NpyDtype::f64, {}, std::vector<unsigned char>(8, 0)});
  write_npy((out / "bool_2x2.npy").string(), {NpyDtype::b1, {2, 2}, {1, 0, 0, 1}});
  write_npy((out / "u8_empty.npy").string(), {NpyDtype::u8, {0, 3}, {}});

  std::ifstream in(out / "f32_2x3.npy", std::ios::binary);
  const std::string c_order{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::string fortran = c_order;
  const size_t flag = fortran.find("False,");
  fortran.replace(flag, 6, "True, ");  // same length: the header keeps its padding
  write(out / "f32_2x3_fortran.npy", fortran);
  // Format 2.0: a 4-byte header length instead of 2.
  const auto header_length = uint32_t(uint8_t(c_order[8]) | uint8_t(c_order[9]) << 8);
  std::string v2 = c_order.substr(0, 6) + std::string{2, 0};
  for (int k = 0; k < 4; ++k) v2 += char(header_length >> (8 * k));
  write(out / "f32_2x3_v2.npy", v2 + c_order.substr(10));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR (writes DIR/<target>/<name>; fuzz/seeds.sh files them in corpus/)\n");
    return 2;
  }
  try {
    softmax_seeds(argv[1]);
    attention_seeds(argv[1]);
    npy_seeds(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
