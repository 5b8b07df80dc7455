// attncheck mha-shapes: the shape of every tensor of a multi-head self-attention layer and its
// parameter counts, beside the fully connected map from D N inputs to D N outputs that it replaces
// (UDL's count, chapter 12). For checking a layer's buffers, or a textbook's numbers, by hand:
//   Q = x w_q + b_q, K = x w_k + b_k, V = x w_v + b_v, heads split by columns,
//   head_h = softmax(Q_h K_g^T / sqrt(dk)) V_g with g = h / (H / H_kv), out = concat_h(head_h) w_o + b_o.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "attncheck/commands.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/printable.hpp"

namespace attncheck {
namespace {

// 2^31 - 1: a size a plugin's int dimensions can hold. Checked here, not by the flags' range,
// whose errors would print it as 2.14748e9.
constexpr int64_t kMostSize = 2147483647;

struct Dimensions {
  int64_t N = 1, D = 1, H = 1, H_kv = 1, dk = 1, dv = 1;
  bool bias = false;
};

// Every count is checked: a product past int64 is an input error, never a wrapped number.
int64_t product(const char* what, std::initializer_list<int64_t> factors) {
  int64_t result = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(result, f, &result))
      throw std::runtime_error(std::string(what) + " overflows int64: give smaller sizes");
  return result;
}
int64_t sum(const char* what, std::initializer_list<int64_t> terms) {
  int64_t result = 0;
  for (int64_t t : terms)
    if (__builtin_add_overflow(result, t, &result))
      throw std::runtime_error(std::string(what) + " overflows int64: give smaller sizes");
  return result;
}

// The flags have checked x >= 1; a size must also be whole (2.5 tokens means nothing) and fit an int.
int64_t whole(const FlagValues& o, const std::string& name) {
  const double x = o.number(name);
  if (x != std::floor(x) || x > double(kMostSize))
    throw std::runtime_error("--" + name + " must be a whole number from 1 to " + grouped(kMostSize) + ", got '" + o.text(name) +
                             "'");
  return int64_t(x);
}

Dimensions dimensions(const FlagValues& o) {
  Dimensions d{.N = whole(o, "tokens"), .D = whole(o, "d-model"), .H = whole(o, "heads")};
  d.H_kv = o.given("kv-heads") ? whole(o, "kv-heads") : d.H;
  // Query head h reads KV head h / (H / H_kv), so the KV heads must share the query heads evenly.
  if (d.H % d.H_kv != 0)
    throw std::runtime_error("--heads " + grouped(d.H) + " is not a multiple of --kv-heads " + grouped(d.H_kv));
  if (!o.given("d-k") && d.D % d.H != 0)
    throw std::runtime_error("--d-model " + grouped(d.D) + " does not split into --heads " + grouped(d.H) +
                             " equal heads: give --d-k (its default is D / H)");
  d.dk = o.given("d-k") ? whole(o, "d-k") : d.D / d.H;
  d.dv = o.given("d-v") ? whole(o, "d-v") : d.dk;
  d.bias = o.text("bias") == "yes";
  return d;
}

struct Tensor {
  std::string name, symbols;
  std::vector<int64_t> dims;
  std::string what;
};

std::vector<Tensor> input_maps(const Dimensions& d) {
  const int64_t q = product("H dk", {d.H, d.dk}), k = product("H_kv dk", {d.H_kv, d.dk}), v = product("H_kv dv", {d.H_kv, d.dv});
  std::vector<Tensor> t = {{"x", "[N][D]", {d.N, d.D}, "the tokens, one per row"},
                           {"w_q", "[D][H dk]", {d.D, q}, "queries' map"},
                           {"w_k", "[D][H_kv dk]", {d.D, k}, "keys' map"},
                           {"w_v", "[D][H_kv dv]", {d.D, v}, "values' map"}};
  if (d.bias)
    t.insert(t.end(), {{"b_q", "[H dk]", {q}, "added to every row of Q"},
                       {"b_k", "[H_kv dk]", {k}, "added to every row of K"},
                       {"b_v", "[H_kv dv]", {v}, "added to every row of V"}});
  t.insert(t.end(), {{"Q", "[N][H dk]", {d.N, q}, "query head h: columns h dk .. h dk + dk - 1"},
                     {"K", "[N][H_kv dk]", {d.N, k}, "KV head g: columns g dk .. g dk + dk - 1"},
                     {"V", "[N][H_kv dv]", {d.N, v}, "KV head g: columns g dv .. g dv + dv - 1"}});
  return t;
}

std::vector<Tensor> tensors(const Dimensions& d) {
  std::vector<Tensor> t = input_maps(d);
  const int64_t merged = product("H dv", {d.H, d.dv});
  t.insert(t.end(), {{"scores", "[H][N][N]", {d.H, d.N, d.N}, "Q_h K_g^T / sqrt(dk), g = h / (H / H_kv)"},
                     {"weights", "[H][N][N]", {d.H, d.N, d.N}, "softmax of each row of the scores"},
                     {"heads", "[N][H dv]", {d.N, merged}, "head_h = weights_h V_g, concatenated"},
                     {"w_o", "[H dv][D]", {merged, d.D}, "output projection"}});
  if (d.bias) t.push_back({"b_o", "[D]", {d.D}, "added to every row of out"});
  t.push_back({"out", "[N][D]", {d.N, d.D}, "one row per token, as x"});
  return t;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text;
  for (int64_t n : dims) {
    text += '[';  // not "[" + grouped(n) + "]": GCC 12 warns falsely on that (-Wrestrict, its bug 105329)
    text += grouped(n);
    text += ']';
  }
  return text;
}

struct Counts {
  int64_t qkv_weights, qkv_biases, out_weights, out_biases, weights, biases;
  int64_t per_head, all_heads, dense_inputs, dense_weights;
};

// Each term is named, so that an overflow says which.
Counts counts(const Dimensions& d) {
  Counts c{};
  c.qkv_weights =
      sum("D H dk + D H_kv dk + D H_kv dv", {product("D H dk", {d.D, d.H, d.dk}), product("D H_kv dk", {d.D, d.H_kv, d.dk}),
                                             product("D H_kv dv", {d.D, d.H_kv, d.dv})});
  c.qkv_biases = !d.bias ? 0
                         : sum("H dk + H_kv dk + H_kv dv", {product("H dk", {d.H, d.dk}), product("H_kv dk", {d.H_kv, d.dk}),
                                                            product("H_kv dv", {d.H_kv, d.dv})});
  c.out_weights = product("H dv D", {d.H, d.dv, d.D});
  c.out_biases = d.bias ? d.D : 0;
  c.weights = sum("the layer's weight count", {c.qkv_weights, c.out_weights});
  c.biases = sum("the layer's bias count", {c.qkv_biases, c.out_biases});
  c.per_head = product("N N", {d.N, d.N});
  c.all_heads = product("H N N", {d.H, d.N, d.N});
  c.dense_inputs = product("D N", {d.D, d.N});
  c.dense_weights = product("(D N)^2", {c.dense_inputs, c.dense_inputs});
  return c;
}

std::string weights_and_biases(int64_t weights, int64_t biases) {
  return grouped(weights) + " weights, " + grouped(biases) + " biases";
}

void print_shapes(const Dimensions& d) {
  std::printf("multi-head self-attention: N %s tokens of width D %s; H %s heads of dk %s, dv %s; H_kv %s KV heads; biases %s\n",
              grouped(d.N).c_str(), grouped(d.D).c_str(), grouped(d.H).c_str(), grouped(d.dk).c_str(), grouped(d.dv).c_str(),
              grouped(d.H_kv).c_str(), d.bias ? "yes" : "no");
  std::printf("  %-8s %-13s %-16s %s\n", "tensor", "shape", "here", "what");
  for (const Tensor& t : tensors(d))
    std::printf("  %-8s %-13s %-16s %s\n", t.name.c_str(), t.symbols.c_str(), shape_text(t.dims).c_str(), t.what.c_str());
}

void print_counts(const Counts& c) {
  std::printf("queries, keys, values: %s\n", weights_and_biases(c.qkv_weights, c.qkv_biases).c_str());
  std::printf("output projection: %s\n", weights_and_biases(c.out_weights, c.out_biases).c_str());
  std::printf("layer total: %s\n", weights_and_biases(c.weights, c.biases).c_str());
  std::printf("attention weights per head: %s\n", grouped(c.per_head).c_str());
  std::printf("attention weights, all heads: %s\n", grouped(c.all_heads).c_str());
  std::printf("fully connected map it replaces, %s inputs to %s outputs: %s\n", grouped(c.dense_inputs).c_str(),
              grouped(c.dense_inputs).c_str(), weights_and_biases(c.dense_weights, c.dense_inputs).c_str());
}

int mha_shapes(const FlagValues& o) {
  const Dimensions d = dimensions(o);
  // Everything is counted before anything prints, so an overflow is one line and no half table
  // (the shapes' products, H dk and the like, are factors of the counts' and cannot overflow first).
  const Counts c = counts(d);
  print_shapes(d);
  print_counts(c);
  return 0;
}

}  // namespace

int mha_shapes_command(const std::vector<std::string>& args) {
  return Flags("mha-shapes")
      .number("tokens", "N", "the tokens attended over (self-attention: N queries, N keys)", {}, 1)
      .required()
      .number("d-model", "D", "the width of each token, of x and of out", {}, 1)
      .required()
      .number("heads", "H", "query heads", {}, 1)
      .required()
      .choice("bias", {"yes", "no"}, "biases b_q, b_k, b_v and b_o", "no")
      .number("d-k", "K", "a query's and a key's width per head; without it D / H, which must divide", {}, 1)
      .number("d-v", "V", "a value's width per head; without it dk", {}, 1)
      .number("kv-heads", "G", "key and value heads, for grouped-query attention; without it H; must divide H", {}, 1)
      .run(args, mha_shapes);
}

}  // namespace attncheck
