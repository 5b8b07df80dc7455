// Writes the `attncheck compare` example of README.md into DIR: q, k, v [1,2,5,8] float32 (Tq = Tk
// = 5, dk = dv = 8), a causal allow mask [5,5], the built-in implementation's out.npy, and
// out_wrong_scale.npy from a kernel that scales by 1/sqrt(H dk) (wrong: outside the bound).
// long_{q,k,v}.npy, a [1,1,4,64] query block over 512 keys (dv 8), where the bound is loose enough
// to let a sloppy kernel through: long_out.npy from the built-in implementation, and
// long_out_approx_exp.npy from one whose exp errs by about 1.7e-3 (imprecise: the precision gate).
// And flush_{q,k,v,out}.npy: a [1,1,1,1] query, two keys, whose q is the largest float subnormal,
// k = [1e34, 0], v = [1, 0]; out is what a correct kernel gives with denormals-are-zero on: 0.5
// (exact 0.5000294). gqa_*.npy: grouped heads with a window, a soft-cap, key lengths and the lse
// (below). half_*.npy and bf16_*.npy: a low-precision problem in float16 and in bfloat16 (as uint16
// bit patterns, the way PyTorch users dump it), each with its correct output and the output of a
// kernel that keeps a running sum in the format (below). bwd_*.npy: a backward pass with grouped heads,
// its gradients and two planted bugs' (below). paged_*.npy and varlen_*.npy: a paged decode step
// with sinks and three packed sequences, each with a planted bug's output (below). With --bad-inputs it also writes
// k_short.npy [1,2,4,8], whose Tk does not fit V's, and varlen_{k,v}_short.npy, 5 packed keys where
// cu_seqlens_k says 11.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/npy.hpp"
#include "backward.hpp"
#include "variant.hpp"

using namespace attncheck;

namespace {

void save(const std::string& path, const std::vector<float>& x, std::vector<int64_t> shape) {
  NpyArray a{NpyDtype::f32, std::move(shape), std::vector<unsigned char>(x.size() * 4)};
  std::memcpy(a.data.data(), x.data(), a.data.size());
  write_npy(path, a);
}

// x, values of the 2-byte format F in any shape, -> a file of F's bit patterns as `dtype`
// (float16 for Half; uint16 for BFloat16, which NumPy cannot name).
template <class F>
void save_bits(const std::string& path, const std::vector<float>& x, std::vector<int64_t> shape, NpyDtype dtype) {
  NpyArray a{dtype, std::move(shape), std::vector<unsigned char>(x.size() * 2)};
  for (size_t n = 0; n < x.size(); ++n) {
    const uint16_t bits = Precision<F>::from_double(x[n]).bits;
    a.data[2 * n] = uint8_t(bits);  // little-endian, as the .npy descr says
    a.data[2 * n + 1] = uint8_t(bits >> 8);
  }
  write_npy(path, a);
}

// The low-precision examples' shape: B = H = 1, Tq 4, Tk 512, dk 64, dv 8.
constexpr Shape kNarrowShape{1, 1, 4, 512, 64, 8};

// The low-precision example in format F, written as PREFIX_{q,k,v,out}.npy of `dtype`: the
// [1,1,4,64] queries, [1,1,512,64] keys and [1,1,512,8] values of `normal` (standard normal draws,
// in that order; the values shifted by 1) rounded to F; out from the built-in implementation on the
// problem in format F, and PREFIX_`wrong` from the planted bug `bug`, a running sum kept in a 2-byte
// format. Tk 512 gives the sum many keys to drift over, and the values' mean makes it as large as
// the bound's sum_j p_j |v_j|: with zero-mean values sum_j p_j v_j stays small, its roundings with
// it, and an fp16 accumulator stays inside the bound (error/bound 0.35 with these draws unshifted):
// it is then harmless.
template <class F>
void narrow_example(const std::string& dir, const std::string& prefix, NpyDtype dtype, const std::vector<double>& normal,
                    const std::string& wrong, Mutation bug) {
  const Shape s = kNarrowShape;
  auto rounded = [&](int64_t from, int64_t n, double shift) {  // n values of F, held in float
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t at = 0; at < n; ++at) x[size_t(at)] = float(round_to<F>(normal[size_t(from + at)] + shift));
    return x;
  };
  const std::vector<float> q = rounded(0, s.q_size(), 0), k = rounded(s.q_size(), s.k_size(), 0),
                           v = rounded(s.q_size() + s.k_size(), s.v_size(), 1);
  Problem<float> p;
  p.shape = s;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.format = Precision<F>::format;
  std::vector<float> out(size_t(s.out_size()));
  attention(p, Result<float>{out.data()});
  save_bits<F>(dir + "/" + prefix + "_q.npy", q, {1, 1, s.Tq, s.dk}, dtype);
  save_bits<F>(dir + "/" + prefix + "_k.npy", k, {1, 1, s.Tk, s.dk}, dtype);
  save_bits<F>(dir + "/" + prefix + "_v.npy", v, {1, 1, s.Tk, s.dv}, dtype);
  save_bits<F>(dir + "/" + prefix + "_out.npy", out, {1, 1, s.Tq, s.dv}, dtype);
  std::vector<float> buggy(out.size());
  variant_attention(p, buggy.data(), mutant(bug));
  save_bits<F>(dir + "/" + prefix + "_" + wrong, buggy, {1, 1, s.Tq, s.dv}, dtype);
}

// [1,heads,rows,width] values from [-2, 2] in steps of 1/500, drawn from `choose`.
std::vector<float> normal_tensor(SeededChooser& choose, int64_t rows, int64_t width, int64_t heads = 2) {
  std::vector<float> x(size_t(heads * rows * width));
  for (float& e : x) e = float(int64_t(choose.below(2001)) - 1000) / 500;
  return x;
}

// n standard normal draws from `choose`.
std::vector<float> normal_values(SeededChooser& choose, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = float(standard_normal(choose));
  return x;
}

// The README's example, q.npy to out_wrong_scale.npy; returns its keys (k_short.npy's).
std::vector<float> causal_example(const std::string& dir, SeededChooser& choose) {
  const Shape s{1, 2, 5, 5, 8, 8};
  const std::vector<float> q = normal_tensor(choose, s.Tq, s.dk), k = normal_tensor(choose, s.Tk, s.dk),
                           v = normal_tensor(choose, s.Tk, s.dv);
  NpyArray allow{NpyDtype::b1, {s.Tq, s.Tk}, std::vector<unsigned char>(size_t(s.Tq * s.Tk))};
  for (int64_t i = 0; i < s.Tq; ++i)
    for (int64_t j = 0; j < s.Tk; ++j) allow.data[size_t(i * s.Tk + j)] = j <= i;

  Problem<float> p;
  p.shape = s;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.masks.allow = allow.data.data();
  std::vector<float> out(size_t(s.out_size())), wrong(out.size());
  attention(p, Result<float>{out.data()});
  variant_attention(p, wrong.data(), Variant{.mutation = Mutation::model_width_scale});

  save(dir + "/q.npy", q, {s.B, s.H, s.Tq, s.dk});
  save(dir + "/k.npy", k, {s.B, s.H, s.Tk, s.dk});
  save(dir + "/v.npy", v, {s.B, s.H, s.Tk, s.dv});
  write_npy(dir + "/allow.npy", allow);
  save(dir + "/out.npy", out, {s.B, s.H, s.Tq, s.dv});
  save(dir + "/out_wrong_scale.npy", wrong, {s.B, s.H, s.Tq, s.dv});
  return k;
}

// long_*.npy: the query block over 512 keys, its out and the approximate exp's.
void long_example(const std::string& dir, SeededChooser& choose) {
  const Shape l{1, 1, 4, 512, 64, 8};
  const std::vector<float> long_q = normal_tensor(choose, l.Tq, l.dk, 1), long_k = normal_tensor(choose, l.Tk, l.dk, 1),
                           long_v = normal_tensor(choose, l.Tk, l.dv, 1);
  Problem<float> long_p;
  long_p.shape = l;
  long_p.q = long_q.data();
  long_p.k = long_k.data();
  long_p.v = long_v.data();
  std::vector<float> long_out(size_t(l.Tq * l.dv)), imprecise(long_out.size());
  attention(long_p, Result<float>{long_out.data()});
  variant_attention(long_p, imprecise.data(), Variant{.mutation = Mutation::approx_exp});
  save(dir + "/long_q.npy", long_q, {1, 1, l.Tq, l.dk});
  save(dir + "/long_k.npy", long_k, {1, 1, l.Tk, l.dk});
  save(dir + "/long_v.npy", long_v, {1, 1, l.Tk, l.dv});
  save(dir + "/long_out.npy", long_out, {1, 1, l.Tq, l.dv});
  save(dir + "/long_out_approx_exp.npy", imprecise, {1, 1, l.Tq, l.dv});
}

// flush_*.npy: the subnormal query, and out with denormals-are-zero on.
void flush_example(const std::string& dir) {
  const Case<float> flush = flushed_subnormal_case();
  std::vector<float> flush_out(1);
  variant_attention(flush.problem(), flush_out.data(), Variant{.flush_subnormals = true});
  save(dir + "/flush_q.npy", flush.q, {1, 1, 1, 1});
  save(dir + "/flush_k.npy", flush.k, {1, 1, 2, 1});
  save(dir + "/flush_v.npy", flush.v, {1, 1, 2, 1});
  save(dir + "/flush_out.npy", flush_out, {1, 1, 1, 1});
}

// gqa_*.npy: grouped heads with every ABI v2 option: B 2, H 4 over H_kv 2, Tq 5, Tk 7, dk dv 8,
// causal lower-right, window (2, 0), soft-cap 2, key lengths {7, 4}; out and lse from the built-in
// implementation, and out_interleaved from heads paired as h % H_kv (onnx PR 7274).
void gqa_example(const std::string& dir, SeededChooser& choose) {
  const Shape g{2, 4, 5, 7, 8, 8, 2};
  const std::vector<float> gqa_q = normal_tensor(choose, g.Tq, g.dk, g.B * g.H),
                           gqa_k = normal_tensor(choose, g.Tk, g.dk, g.B * 2), gqa_v = normal_tensor(choose, g.Tk, g.dv, g.B * 2);
  const std::vector<int32_t> lengths = {7, 4};
  Problem<float> gp;
  gp.shape = g;
  gp.q = gqa_q.data();
  gp.k = gqa_k.data();
  gp.v = gqa_v.data();
  gp.masks = {nullptr, Causal::lower_right, lengths.data(), 2, 0};
  gp.softcap = 2;
  std::vector<float> gqa_out(size_t(g.out_size())), gqa_lse(size_t(g.lse_size())), interleaved(gqa_out.size());
  attention(gp, Result<float>{gqa_out.data(), nullptr, gqa_lse.data()});
  variant_attention(gp, interleaved.data(), Variant{.mutation = Mutation::gqa_heads_interleaved});
  save(dir + "/gqa_q.npy", gqa_q, {g.B, g.H, g.Tq, g.dk});
  save(dir + "/gqa_k.npy", gqa_k, {g.B, 2, g.Tk, g.dk});
  save(dir + "/gqa_v.npy", gqa_v, {g.B, 2, g.Tk, g.dv});
  save(dir + "/gqa_out.npy", gqa_out, {g.B, g.H, g.Tq, g.dv});
  save(dir + "/gqa_lse.npy", gqa_lse, {g.B, g.H, g.Tq});
  save(dir + "/gqa_out_interleaved.npy", interleaved, {g.B, g.H, g.Tq, g.dv});
  std::vector<float> base2 = gqa_lse;  // flashinfer issue 2114
  for (float& x : base2) x = float(x / std::log(2.0));
  save(dir + "/gqa_lse_base2.npy", base2, {g.B, g.H, g.Tq});
  // gqa_bias.npy [B,H,Tq,Tk], an ALiBi-style slope per head, and gqa_out_bias.npy the output with it.
  std::vector<float> bias(size_t(g.scores_size()));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t i = 0; i < g.Tq; ++i)
        for (int64_t j = 0; j < g.Tk; ++j) bias[size_t(g.scores_at(b, h, i) + j)] = -0.5f * float(h + 1) * float(g.Tk - 1 - j);
  gp.bias = bias.data();
  std::vector<float> biased(gqa_out.size());
  attention(gp, Result<float>{biased.data()});
  save(dir + "/gqa_bias.npy", bias, {g.B, g.H, g.Tq, g.Tk});
  save(dir + "/gqa_out_bias.npy", biased, {g.B, g.H, g.Tq, g.dv});
  NpyArray lens{NpyDtype::i32, {g.B}, std::vector<unsigned char>(lengths.size() * 4)};
  std::memcpy(lens.data.data(), lengths.data(), lens.data.size());
  write_npy(dir + "/gqa_kv_lens.npy", lens);
}

// bwd_*.npy: the backward, as autograd runs it on its own forward: B 1, H 4 over H_kv 2, Tq 8,
// Tk 12, dk 16, dv 8, causal lower-right, soft-cap 2, standard normal q, k, v and dout; out and lse
// from the built-in forward, dq, dk, dv from the built-in backward given them, and two planted
// bugs' gradients: dk without the scale, dv of each KV head from its first query head only.
void backward_example(const std::string& dir, SeededChooser& choose) {
  const Shape w{1, 4, 8, 12, 16, 8, 2};
  const std::vector<float> bwd_q = normal_values(choose, w.q_size()), bwd_k = normal_values(choose, w.k_size()),
                           bwd_v = normal_values(choose, w.v_size()), bwd_dout = normal_values(choose, w.out_size());
  Problem<float> bp;
  bp.shape = w;
  bp.q = bwd_q.data();
  bp.k = bwd_k.data();
  bp.v = bwd_v.data();
  bp.masks.causal = Causal::lower_right;
  bp.softcap = 2;
  std::vector<float> bwd_out(size_t(w.out_size())), bwd_lse(size_t(w.lse_size()));
  attention(bp, Result<float>{bwd_out.data(), nullptr, bwd_lse.data()});
  // grads(dq, dk, dv): this forward's out, lse and dout, and the gradients' buffers dq [B,H,Tq,dk],
  // dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv].
  std::vector<float> dq(size_t(w.q_size())), dk(size_t(w.k_size())), dv(size_t(w.v_size()));
  auto grads = [&](std::vector<float>& q_grad, std::vector<float>& k_grad, std::vector<float>& v_grad) {
    return Grads<float>{bwd_out.data(), bwd_lse.data(), bwd_dout.data(), q_grad.data(), k_grad.data(), v_grad.data()};
  };
  attention_backward(bp, grads(dq, dk, dv));
  const std::vector<int64_t> q_shape{w.B, w.H, w.Tq, w.dk}, k_shape{w.B, w.H_kv, w.Tk, w.dk}, v_shape{w.B, w.H_kv, w.Tk, w.dv},
      out_shape{w.B, w.H, w.Tq, w.dv};
  save(dir + "/bwd_q.npy", bwd_q, q_shape);
  save(dir + "/bwd_k.npy", bwd_k, k_shape);
  save(dir + "/bwd_v.npy", bwd_v, v_shape);
  save(dir + "/bwd_out.npy", bwd_out, out_shape);
  save(dir + "/bwd_lse.npy", bwd_lse, {w.B, w.H, w.Tq});
  save(dir + "/bwd_dout.npy", bwd_dout, out_shape);
  save(dir + "/bwd_dq.npy", dq, q_shape);
  save(dir + "/bwd_dk.npy", dk, k_shape);
  save(dir + "/bwd_dv.npy", dv, v_shape);
  std::vector<float> bug_dq(dq.size()), bug_dk(dk.size()), bug_dv(dv.size());
  variant_backward(bp, grads(bug_dq, bug_dk, bug_dv), backward_mutant(BackwardMutation::dk_scale_missing));
  save(dir + "/bwd_dk_scale_missing.npy", bug_dk, k_shape);
  variant_backward(bp, grads(bug_dq, bug_dk, bug_dv), backward_mutant(BackwardMutation::dkdv_not_summed_over_group));
  save(dir + "/bwd_dv_gqa_not_summed.npy", bug_dv, v_shape);
}

void save_int32(const std::string& path, const std::vector<int32_t>& x, std::vector<int64_t> shape) {
  NpyArray a{NpyDtype::i32, std::move(shape), std::vector<unsigned char>(x.size() * 4)};
  std::memcpy(a.data.data(), x.data(), a.data.size());
  write_npy(path, a);
}

// paged_*.npy: a decode step over a paged cache, with sinks: B 2, H 4 over H_kv 2, Tq 2, dk 8, dv 4;
// pools k [NB 8,H_kv,BS 3,dk] and v of blocks of 3 keys, 4 a sequence (Tk 12), the table {6 2 7 2 |
// 1 5 3 3} (blocks shuffled, entries past a sequence's last block naming any, blocks 0 and 4 unnamed);
// key lengths {5, 9}, KV-end causal; sinks {-inf, 0.5, -1, 2}; every slot no key fills NaN. out and
// lse from the built-in implementation, and the output of a kernel reading the table as [BPS][B].
void paged_example(const std::string& dir, SeededChooser& choose) {
  Shape s{2, 4, 2, 12, 8, 4, 2};
  s.NB = 8, s.BS = 3, s.BPS = 4;
  const std::vector<int32_t> table = {6, 2, 7, 2, 1, 5, 3, 3}, lengths = {5, 9};
  const std::vector<float> sinks = {-INFINITY, 0.5f, -1.0f, 2.0f}, q = normal_values(choose, s.q_size());
  std::vector<float> k(size_t(s.k_size()), NAN), v(size_t(s.v_size()), NAN);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; h += s.H / s.kv_heads())
      for (int64_t j = 0; j < lengths[size_t(b)]; ++j) {
        const int64_t row = kv_row(s, table.data(), b, h, j);
        for (int64_t d = 0; d < s.dk; ++d) k[size_t(row * s.dk + d)] = float(standard_normal(choose));
        for (int64_t d = 0; d < s.dv; ++d) v[size_t(row * s.dv + d)] = float(standard_normal(choose));
      }
  Problem<float> p;
  p.shape = s;
  p.q = q.data(), p.k = k.data(), p.v = v.data();
  p.masks = {nullptr, Causal::kv_end, lengths.data()};
  p.sinks = sinks.data(), p.block_table = table.data();
  std::vector<float> out(size_t(s.out_size())), lse(size_t(s.lse_size())), transposed(out.size());
  attention(p, Result<float>{out.data(), nullptr, lse.data()});
  variant_attention(p, transposed.data(), Variant{.mutation = Mutation::paged_table_transposed});
  save(dir + "/paged_q.npy", q, {s.B, s.H, s.Tq, s.dk});
  save(dir + "/paged_k.npy", k, {s.NB, s.kv_heads(), s.BS, s.dk});
  save(dir + "/paged_v.npy", v, {s.NB, s.kv_heads(), s.BS, s.dv});
  save_int32(dir + "/paged_table.npy", table, {s.B, s.BPS});
  save_int32(dir + "/paged_kv_lens.npy", lengths, {s.B});
  save(dir + "/paged_sinks.npy", sinks, {s.H});
  save(dir + "/paged_out.npy", out, {s.B, s.H, s.Tq, s.dv});
  save(dir + "/paged_lse.npy", lse, {s.B, s.H, s.Tq});
  save(dir + "/paged_out_table_transposed.npy", transposed, {s.B, s.H, s.Tq, s.dv});
}

// varlen_*.npy: three sequences packed, q and out [H,T,d] (H 2 over H_kv 1, dk dv 8) of query
// lengths {3, 0, 4} and key lengths {5, 2, 4} (cu_seqlens_q {0 3 3 7}, cu_seqlens_k {0 5 7 11}), causal
// lower-right within each; out and lse from the built-in, and the output of a kernel whose sequences
// take their next one's first key (cu_seqlens off by one).
void varlen_example(const std::string& dir, SeededChooser& choose) {
  Shape s{3, 2, 7, 11, 8, 8, 1};
  s.varlen = true;
  const std::vector<int32_t> cu_q = {0, 3, 3, 7}, cu_k = {0, 5, 7, 11};
  const std::vector<float> q = normal_values(choose, s.q_size()), k = normal_values(choose, s.k_size()),
                           v = normal_values(choose, s.v_size());
  Problem<float> p;
  p.shape = s;
  p.q = q.data(), p.k = k.data(), p.v = v.data();
  p.masks.causal = Causal::lower_right;
  p.cu_seqlens_q = cu_q.data(), p.cu_seqlens_k = cu_k.data();
  std::vector<float> out(size_t(s.out_size())), lse(size_t(s.lse_size())), bleeding(out.size());
  attention(p, Result<float>{out.data(), nullptr, lse.data()});
  variant_attention(p, bleeding.data(), Variant{.mutation = Mutation::varlen_cu_seqlens_off_by_one});
  save(dir + "/varlen_q.npy", q, {s.H, s.Tq, s.dk});
  save(dir + "/varlen_k.npy", k, {s.kv_heads(), s.Tk, s.dk});
  save(dir + "/varlen_v.npy", v, {s.kv_heads(), s.Tk, s.dv});
  save_int32(dir + "/varlen_cu_seqlens_q.npy", cu_q, {s.B + 1});
  save_int32(dir + "/varlen_cu_seqlens_k.npy", cu_k, {s.B + 1});
  save(dir + "/varlen_out.npy", out, {s.H, s.Tq, s.dv});
  save(dir + "/varlen_lse.npy", lse, {s.H, s.Tq});
  save(dir + "/varlen_out_cu_seqlens_off_by_one.npy", bleeding, {s.H, s.Tq, s.dv});
}

}  // namespace

int main(int argc, char** argv) {
  const bool bad_inputs = argc == 3 && std::string(argv[2]) == "--bad-inputs";
  if (argc != 2 && !bad_inputs) {
    std::fprintf(stderr, "usage: make_compare_example DIR [--bad-inputs]\n");
    return 2;
  }
  const std::string dir = argv[1];
  SeededChooser choose(2026);  // one sequence of draws, example after example
  const std::vector<float> k = causal_example(dir, choose);
  long_example(dir, choose);
  flush_example(dir);
  gqa_example(dir, choose);
  // One problem in both formats: in float16 with the output accumulated in float16, in bfloat16 with
  // the softmax's exp and normalizer kept in bfloat16, key by key.
  std::vector<double> normal(size_t(kNarrowShape.q_size() + kNarrowShape.k_size() + kNarrowShape.v_size()));
  for (double& x : normal) x = standard_normal(choose);
  narrow_example<Half>(dir, "half", NpyDtype::f16, normal, "out_fp16_accumulated.npy", Mutation::output_accumulator_fp16);
  narrow_example<BFloat16>(dir, "bf16", NpyDtype::u16, normal, "out_normalizer_in_bf16.npy", Mutation::softmax_bf16);
  backward_example(dir, choose);
  paged_example(dir, choose);
  varlen_example(dir, choose);
  if (bad_inputs) {
    save(dir + "/k_short.npy", std::vector<float>(k.begin(), k.begin() + 2 * 4 * 8), {1, 2, 4, 8});
    save(dir + "/varlen_k_short.npy", std::vector<float>(5 * 8, 1.0f), {1, 5, 8});  // 5 packed keys, 11 by cu_seqlens_k
    save(dir + "/varlen_v_short.npy", std::vector<float>(5 * 8, 1.0f), {1, 5, 8});
  }
  return 0;
}
