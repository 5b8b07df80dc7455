"""The feature table of contract/include/attncheck/features.hpp and the call schema of
call_slots.def, for the Python client.

Written by `attncheck features --python`; ctest (python.FeatureTableIsTheContracts) checks that
it is what that prints. Do not edit it by hand.
"""

# ABI v2's capability bits, by the name a served function claims them with.
CAPABILITIES = {"f32": 1, "f64": 2, "f16": 4, "bf16": 8, "allow": 16, "causal": 32, "kv_lens": 64, "gqa": 128, "window": 256, "softcap": 512, "bias": 1024, "lse": 2048, "backward": 4096, "dropout": 8192, "dropout_mask": 16384, "mha": 32768, "mha_weights": 65536, "sinks": 131072, "kv_cache": 262144, "paged_kv": 524288, "varlen": 1048576}
# What reports call each.
NAMES = {"f32": "f32", "f64": "f64", "f16": "f16", "bf16": "bf16", "allow": "allow mask", "causal": "causal", "kv_lens": "key lengths", "gqa": "grouped KV heads", "window": "window", "softcap": "soft-cap", "bias": "bias", "lse": "lse", "backward": "backward", "dropout": "dropout", "dropout_mask": "dropout keep mask", "mha": "multi-head layer", "mha_weights": "layer weights", "sinks": "sinks", "kv_cache": "KV-end causal", "paged_kv": "paged KV", "varlen": "varlen"}
# The PROB header's flag bits.
FLAGS = {"allow": 1, "kv_lens": 2, "bias": 4, "lse": 8, "backward": 16, "dropout": 32, "dropout_mask": 64, "mha": 128, "mha_weights": 256, "sinks": 512, "paged_kv": 1024, "varlen": 2048}
# The case text's line (or word) that carries each.
LINES = {"allow": "allow", "causal": "causal", "kv_lens": "key-lengths", "gqa": "H_kv", "window": "window", "softcap": "softcap", "bias": "bias", "dropout": "dropout", "sinks": "sinks", "paged_kv": "paged", "varlen": "varlen"}
# ABI v2's dtype codes, each format's storage in the protocol's bytes, and its log-sum-exp's.
DTYPES = {0: "f32", 1: "f64", 2: "f16", 3: "bf16"}
STORAGE = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "bf16": "<u2"}
LSE_STORAGE = {"f32": "<f4", "f64": "<f8", "f16": "<f4", "bf16": "<f4"}
# The causal modes' codes.
CAUSAL = {0: "none", 1: "upper-left", 2: "lower-right", 3: "kv-end"}
# The restrictions' bits (plugin.h's ATTNCHECK_ONLY_*), by the name serve(restrictions=...) takes, and what reports call each.
RESTRICTIONS = {"causal": 1, "lower_right": 2, "upper_left": 4, "square": 8, "self_attention": 16, "default_scale": 32, "equal_head_dims": 64, "layer_head_width": 128, "within_limits": 256}
RESTRICTION_NAMES = {"causal": "causal only", "lower_right": "lower-right causal only", "upper_left": "upper-left causal only", "square": "square only", "self_attention": "self-attention only", "default_scale": "default scale only", "equal_head_dims": "dk = dv only", "layer_head_width": "layer heads D / H wide only", "within_limits": "within its limits"}
# The limits serve(limits={...}) takes, in attncheck_limits' order, and the list of head widths.
LIMITS = ["max_B", "max_H", "max_Tq", "max_Tk", "head_dim_multiple", "max_head_dim"]
HEAD_DIMS = "head_dims"
# The call schema (call_slots.def): every tensor a call carries, in wire order (a PROB's inputs, a RSLT's
# outputs). name; shape: its dims (B, H, H_kv, Tq, Tk, dk, dv, D); pooled: its dims instead in a paged call
# (BS > 0: K's and V's pools of NB blocks of BS keys), [] where it has none; packed: its dims instead in a varlen
# call (S > 0, S = B + 1: the sequences packed along Tq and Tk), [] where it has none; element: format (the call's dtype),
# wide (LSE_STORAGE), f32 (float always), int32 or byte; feature: the capability that brings it (its FLAGS bit says it is
# there), None for none; roles: in each kind of call (forward, backward, layer) none, in, out, in_if,
# out_if (when the call has its flag, or for a layer slot with a part, that part) or in_unless (not when
# the call has its part); part: a layer call's parts bit that brings it (or leaves it out), 0 for none.
SLOTS = [
    {"name": "q", "shape": ["B", "H", "Tq", "dk"], "pooled": [], "packed": ["H", "Tq", "dk"], "element": "format", "feature": None, "roles": {"forward": "in", "backward": "in", "layer": "none"}, "part": 0},
    {"name": "k", "shape": ["B", "H_kv", "Tk", "dk"], "pooled": ["NB", "H_kv", "BS", "dk"], "packed": ["H_kv", "Tk", "dk"], "element": "format", "feature": None, "roles": {"forward": "in", "backward": "in", "layer": "none"}, "part": 0},
    {"name": "v", "shape": ["B", "H_kv", "Tk", "dv"], "pooled": ["NB", "H_kv", "BS", "dv"], "packed": ["H_kv", "Tk", "dv"], "element": "format", "feature": None, "roles": {"forward": "in", "backward": "in", "layer": "none"}, "part": 0},
    {"name": "allow", "shape": ["B", "Tq", "Tk"], "pooled": [], "packed": [], "element": "byte", "feature": "allow", "roles": {"forward": "in_if", "backward": "in_if", "layer": "in_if"}, "part": 0},
    {"name": "kv_lens", "shape": ["B"], "pooled": [], "packed": [], "element": "int32", "feature": "kv_lens", "roles": {"forward": "in_if", "backward": "in_if", "layer": "in_if"}, "part": 0},
    {"name": "bias", "shape": ["B", "H", "Tq", "Tk"], "pooled": [], "packed": [], "element": "format", "feature": "bias", "roles": {"forward": "in_if", "backward": "in_if", "layer": "none"}, "part": 0},
    {"name": "dout", "shape": ["B", "H", "Tq", "dv"], "pooled": [], "packed": [], "element": "format", "feature": "backward", "roles": {"forward": "none", "backward": "in", "layer": "none"}, "part": 0},
    {"name": "out", "shape": ["B", "H", "Tq", "dv"], "pooled": [], "packed": ["H", "Tq", "dv"], "element": "format", "feature": None, "roles": {"forward": "out", "backward": "in", "layer": "none"}, "part": 0},
    {"name": "keep", "shape": ["B", "H", "Tq", "Tk"], "pooled": [], "packed": [], "element": "byte", "feature": "dropout_mask", "roles": {"forward": "out_if", "backward": "none", "layer": "none"}, "part": 0},
    {"name": "lse", "shape": ["B", "H", "Tq"], "pooled": [], "packed": ["H", "Tq"], "element": "wide", "feature": "lse", "roles": {"forward": "out_if", "backward": "in", "layer": "none"}, "part": 0},
    {"name": "dq", "shape": ["B", "H", "Tq", "dk"], "pooled": [], "packed": [], "element": "format", "feature": "backward", "roles": {"forward": "none", "backward": "out", "layer": "none"}, "part": 0},
    {"name": "dk", "shape": ["B", "H_kv", "Tk", "dk"], "pooled": [], "packed": [], "element": "format", "feature": "backward", "roles": {"forward": "none", "backward": "out", "layer": "none"}, "part": 0},
    {"name": "dv", "shape": ["B", "H_kv", "Tk", "dv"], "pooled": [], "packed": [], "element": "format", "feature": "backward", "roles": {"forward": "none", "backward": "out", "layer": "none"}, "part": 0},
    {"name": "x_q", "shape": ["B", "Tq", "D"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in"}, "part": 0},
    {"name": "x_kv", "shape": ["B", "Tk", "D"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in_unless"}, "part": 1},
    {"name": "w_q", "shape": ["D", "H", "dk"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in"}, "part": 0},
    {"name": "w_k", "shape": ["D", "H_kv", "dk"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in"}, "part": 0},
    {"name": "w_v", "shape": ["D", "H_kv", "dv"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in"}, "part": 0},
    {"name": "b_q", "shape": ["H", "dk"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in_if"}, "part": 2},
    {"name": "b_k", "shape": ["H_kv", "dk"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in_if"}, "part": 4},
    {"name": "b_v", "shape": ["H_kv", "dv"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in_if"}, "part": 8},
    {"name": "w_o", "shape": ["H", "dv", "D"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in"}, "part": 0},
    {"name": "b_o", "shape": ["D"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "in_if"}, "part": 16},
    {"name": "out", "shape": ["B", "Tq", "D"], "pooled": [], "packed": [], "element": "format", "feature": "mha", "roles": {"forward": "none", "backward": "none", "layer": "out"}, "part": 0},
    {"name": "weights", "shape": ["B", "H", "Tq", "Tk"], "pooled": [], "packed": [], "element": "wide", "feature": "mha_weights", "roles": {"forward": "none", "backward": "none", "layer": "out_if"}, "part": 0},
    {"name": "sinks", "shape": ["H"], "pooled": [], "packed": [], "element": "f32", "feature": "sinks", "roles": {"forward": "in_if", "backward": "none", "layer": "none"}, "part": 0},
    {"name": "block_table", "shape": ["B", "BPS"], "pooled": [], "packed": [], "element": "int32", "feature": "paged_kv", "roles": {"forward": "in_if", "backward": "none", "layer": "none"}, "part": 0},
    {"name": "cu_seqlens_q", "shape": ["S"], "pooled": [], "packed": [], "element": "int32", "feature": "varlen", "roles": {"forward": "in_if", "backward": "none", "layer": "none"}, "part": 0},
    {"name": "cu_seqlens_k", "shape": ["S"], "pooled": [], "packed": [], "element": "int32", "feature": "varlen", "roles": {"forward": "in_if", "backward": "none", "layer": "none"}, "part": 0},
]
# The shape vocabulary's dims, in the order of the headers' fields.
DIMS = ["B", "H", "H_kv", "Tq", "Tk", "dk", "dv", "D", "NB", "BS", "BPS", "S"]
# The PROB's headers (protocol.hpp), in wire order: each one's name, the feature whose FLAGS bit brings
# it (None: every PROB has it), its size and its fields in order: name (a dim, a scalar of
# call_scalars.def, or flags, parts, reserved), byte offset in the header, struct code.
HEADERS = [
    {"name": "header", "flag": None, "size": 64, "fields": [["format", 0, "i"], ["flags", 4, "I"], ["B", 8, "i"], ["H", 12, "i"], ["H_kv", 16, "i"], ["Tq", 20, "i"], ["Tk", 24, "i"], ["dk", 28, "i"], ["dv", 32, "i"], ["causal", 36, "i"], ["window_left", 40, "i"], ["window_right", 44, "i"], ["scale", 48, "d"], ["softcap", 56, "d"]]},
    {"name": "dropout", "flag": "dropout", "size": 16, "fields": [["dropout_p", 0, "d"], ["dropout_seed", 8, "Q"]]},
    {"name": "layer", "flag": "mha", "size": 16, "fields": [["D", 0, "i"], ["parts", 4, "I"], ["reserved", 8, "Q"]]},
    {"name": "paged", "flag": "paged_kv", "size": 16, "fields": [["NB", 0, "i"], ["BS", 4, "i"], ["BPS", 8, "i"]]},
]
