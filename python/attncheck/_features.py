"""The feature table of contract/include/attncheck/features.hpp, for the Python client.

Written by `attncheck features --python`; ctest (python.FeatureTableIsTheContracts) checks that
it is what that prints. Do not edit it by hand.
"""

# ABI v2's capability bits, by the name a served function claims them with.
CAPABILITIES = {"f32": 1, "f64": 2, "f16": 4, "bf16": 8, "allow": 16, "causal": 32, "kv_lens": 64, "gqa": 128, "window": 256, "softcap": 512, "bias": 1024, "lse": 2048, "backward": 4096, "dropout": 8192, "dropout_mask": 16384, "mha": 32768, "mha_weights": 65536}
# What reports call each.
NAMES = {"f32": "f32", "f64": "f64", "f16": "f16", "bf16": "bf16", "allow": "allow mask", "causal": "causal", "kv_lens": "key lengths", "gqa": "grouped KV heads", "window": "window", "softcap": "soft-cap", "bias": "bias", "lse": "lse", "backward": "backward", "dropout": "dropout", "dropout_mask": "dropout keep mask", "mha": "multi-head layer", "mha_weights": "layer weights"}
# The PROB header's flag bits.
FLAGS = {"allow": 1, "kv_lens": 2, "bias": 4, "lse": 8, "backward": 16, "dropout": 32, "dropout_mask": 64, "mha": 128, "mha_weights": 256}
# The case text's line (or word) that carries each.
LINES = {"allow": "allow", "causal": "causal", "kv_lens": "key-lengths", "gqa": "H_kv", "window": "window", "softcap": "softcap", "bias": "bias", "dropout": "dropout"}
# ABI v2's dtype codes, each format's storage in the protocol's bytes, and its log-sum-exp's.
DTYPES = {0: "f32", 1: "f64", 2: "f16", 3: "bf16"}
STORAGE = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "bf16": "<u2"}
LSE_STORAGE = {"f32": "<f4", "f64": "<f8", "f16": "<f4", "bf16": "<f4"}
# The causal modes' codes.
CAUSAL = {0: "none", 1: "upper-left", 2: "lower-right"}
# The restrictions' bits (plugin.h's ATTNCHECK_ONLY_*), by the name serve(restrictions=...) takes, and what reports call each.
RESTRICTIONS = {"causal": 1, "lower_right": 2, "upper_left": 4, "square": 8, "self_attention": 16, "default_scale": 32, "equal_head_dims": 64, "layer_head_width": 128, "within_limits": 256}
RESTRICTION_NAMES = {"causal": "causal only", "lower_right": "lower-right causal only", "upper_left": "upper-left causal only", "square": "square only", "self_attention": "self-attention only", "default_scale": "default scale only", "equal_head_dims": "dk = dv only", "layer_head_width": "layer heads D / H wide only", "within_limits": "within its limits"}
# The limits serve(limits={...}) takes, in attncheck_limits' order, and the list of head widths.
LIMITS = ["max_B", "max_H", "max_Tq", "max_Tk", "head_dim_multiple", "max_head_dim"]
HEAD_DIMS = "head_dims"
