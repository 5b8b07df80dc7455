// What the dropout properties share: the rates they draw, a case given dropout, the values that
// make the output the dropped weights themselves, the keep mask read off them, and the margin of
// their statistics.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "attncheck/property.hpp"

namespace attncheck {

// A dropout rate: 0.5 first (the simplest, 1 / (1 - p) = 2 exactly), then 0.25, 0.75, 0.1, 0.9.
// `asymmetric` leaves 0.5 out, at which keeping with probability p or 1 - p is the same.
double draw_dropout_rate(Checker& check, bool asymmetric = false);

// c with dropout at rate p and a drawn seed, every NaN and inf of its inputs made finite: the
// dropout contract is one of finite rows (a dropped weight's value is never read), and the NaN
// rules are checked without it.
Case<float> with_dropout(Checker& check, Case<float> c, double p);

// c with V [Tk, Tk + 1] for every KV head: the identity, then a column of ones. Then out[b,h,i,j]
// for j < Tk is the dropped weight w_ij itself (0 or p_ij / (1 - p)) and out[b,h,i,Tk] their sum,
// so that dropout applied to the output instead cannot pass.
Case<float> with_weight_values(Case<float> c);

// The keep mask [B,H,Tq,Tk] read off out [B,H,Tq,Tk+1] (of a with_weight_values case): weight
// (b, h, i, j) kept where out_ij lies nearer p_ij / (1 - p) than 0, p_ij the oracle's weight before
// dropout; 0 for a key with no weight. Then the oracle's output for that mask must match out.
std::vector<uint8_t> keep_read_off(const Case<float>& c, const std::vector<float>& out, const Reference& weights);

// The oracle's reference for c without dropout: with V = [I | 1], out[.., j] = p_ij for j < Tk.
Reference undropped_weights(const Case<float>& c);

// The oracle's reference for that mask, where a weight too small to read (p_ij / (1 - p) within
// its element's bound, as an f16 output rounds it to 0 kept or dropped) may have been kept or
// not: the sum column may then lie anywhere between the sums either way (the unreadable weights'
// own bounds on top), and its exact value is the point of that interval nearest out's sum column
// [B,H,Tq,Tk+1]: the sum column is judged by its distance outside the interval, with its own bound
// (a middle with a widened bound put an end of the interval at error/bound 1).
Reference read_off_reference(const Case<float>& c, const std::vector<uint8_t>& keep, const Reference& weights,
                             const std::vector<float>& out);

// The statistics' sample: B 2, H 2, Tq = Tk = 64, q = 0 (every weight 1/64 exactly) and V as
// with_weight_values gives, dk = dv = 65 (a kernel may need equal widths), f32, at rate p and
// `seed`: B H Tq Tk = 16384 weights, each 0 or 1 / (64 (1 - p)) in out.
Case<float> uniform_dropout_case(double p, uint64_t seed);

// The keep mask [B,H,Tq,Tk] the kernel drew for uniform_dropout_case(p, seed), read off its output;
// fails the property unless that output is the oracle's for the mask (each weight 0 or
// 1 / (64 (1 - p)), their sum last).
std::vector<uint8_t> uniform_keep_mask(Checker& check, double p, uint64_t seed);

// Hoeffding: the mean of n independent draws in [0, 1] lies farther than this from its expectation,
// on either side, with probability at most 2 exp(-2 n t^2) = 1e-10.
inline double hoeffding_margin(int64_t n) { return std::sqrt(std::log(2e10) / (2 * double(n))); }

// How far from 1 - p a correct kernel's keep probability may be: it may draw the rate in 8 bits
// (FlashAttention keeps a weight when its byte is at most floor(255 (1 - p)): 230/256 at p = 0.1).
inline constexpr double kRateQuantum = 1.0 / 256;

// The fraction of n weights on which mask a from index `first` on and mask b from `second` on agree.
double agreement(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int64_t first, int64_t second, int64_t n);

}  // namespace attncheck
