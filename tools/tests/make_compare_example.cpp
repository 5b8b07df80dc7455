// Writes the `attncheck compare` example of README.md into DIR: q, k, v [1,2,5,8] float32 (Tq = Tk
// = 5, dk = dv = 8), a causal allow mask [5,5], the built-in implementation's out.npy, and
// out_wrong_scale.npy from a kernel that scales by 1/sqrt(H dk), a planted bug for compare to catch.
// With --bad-inputs it also writes k_short.npy [1,2,4,8], whose Tk does not fit V's.
#include <cstdio>
#include <cstring>
#include <string>

#include "attncheck/attention.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/npy.hpp"
#include "variant.hpp"

using namespace attncheck;

namespace {

void save(const std::string& path, const std::vector<float>& x, std::vector<int64_t> shape) {
  NpyArray a{NpyDtype::f32, std::move(shape), std::vector<unsigned char>(x.size() * 4)};
  std::memcpy(a.data.data(), x.data(), a.data.size());
  write_npy(path, a);
}

}  // namespace

int main(int argc, char** argv) {
  const bool bad_inputs = argc == 3 && std::string(argv[2]) == "--bad-inputs";
  if (argc != 2 && !bad_inputs) {
    std::fprintf(stderr, "usage: make_compare_example DIR [--bad-inputs]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const Shape s{1, 2, 5, 5, 8, 8};
  SeededChooser choose(2026);
  auto normal_tensor = [&](int64_t rows, int64_t width) {
    std::vector<float> x(size_t(s.B * s.H * rows * width));
    for (float& e : x) e = float(int64_t(choose.below(2001)) - 1000) / 500;  // [-2, 2] in steps of 1/500
    return x;
  };
  const std::vector<float> q = normal_tensor(s.Tq, s.dk), k = normal_tensor(s.Tk, s.dk), v = normal_tensor(s.Tk, s.dv);
  NpyArray allow{NpyDtype::b1, {s.Tq, s.Tk}, std::vector<unsigned char>(size_t(s.Tq * s.Tk))};
  for (int64_t i = 0; i < s.Tq; ++i)
    for (int64_t j = 0; j < s.Tk; ++j) allow.data[size_t(i * s.Tk + j)] = j <= i;

  Problem<float> p;
  p.shape = s;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.masks.allow = allow.data.data();
  std::vector<float> out(size_t(s.B * s.H * s.Tq * s.dv)), wrong(out.size());
  attention(p, Result<float>{out.data()});
  variant_attention(p, wrong.data(), Variant{.mutation = Mutation::model_width_scale});

  save(dir + "/q.npy", q, {s.B, s.H, s.Tq, s.dk});
  save(dir + "/k.npy", k, {s.B, s.H, s.Tk, s.dk});
  save(dir + "/v.npy", v, {s.B, s.H, s.Tk, s.dv});
  write_npy(dir + "/allow.npy", allow);
  save(dir + "/out.npy", out, {s.B, s.H, s.Tq, s.dv});
  save(dir + "/out_wrong_scale.npy", wrong, {s.B, s.H, s.Tq, s.dv});
  if (bad_inputs) save(dir + "/k_short.npy", std::vector<float>(k.begin(), k.begin() + 2 * 4 * 8), {1, 2, 4, 8});
  return 0;
}
