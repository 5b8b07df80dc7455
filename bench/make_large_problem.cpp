// Writes a large causal float32 problem for `attncheck compare` (bench/compare_large.sh): q, k, v
// [B,H,T,d] standard normal from a fixed seed, and out.npy from attncheck's built-in implementation.
// Usage: make_large_problem DIR B H T d
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attncheck/attention.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/npy.hpp"

using namespace attncheck;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: make_large_problem DIR B H T d\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t B = std::atoll(argv[2]), H = std::atoll(argv[3]), T = std::atoll(argv[4]), d = std::atoll(argv[5]);
  const Shape s{B, H, T, T, d, d};
  SeededChooser choose(2026);
  auto tensor = [&] {
    std::vector<float> x(size_t(B * H * T * d));
    for (float& e : x) e = float(standard_normal(choose));
    return x;
  };
  const std::vector<float> q = tensor(), k = tensor(), v = tensor();
  std::vector<float> out(q.size());
  Problem<float> p;
  p.shape = s;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.masks.causal = Causal::upper_left;
  attention(p, Result<float>{out.data()});
  for (const auto& [name, x] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}}) {
    NpyArray a{NpyDtype::f32, {B, H, T, d}, std::vector<unsigned char>(x->size() * 4)};
    std::memcpy(a.data.data(), x->data(), a.data.size());
    write_npy(dir + "/" + name + ".npy", a);
  }
  return 0;
}
