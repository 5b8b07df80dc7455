"""An inf or NaN in the value of a cached key that OpenVINO's CPU PagedAttentionExtension's sliding
window leaves out reaches every new token's output: with sliding_window w, a new token sees its own
key and the w - 1 before it, yet an inf or NaN value of an older key in the cache makes the output
NaN (its weight 0 times inf or NaN), in a decode step and in a prefill alike. A finite value there
is left out as it should be.

attncheck's finding (strict contract, kind "changed by a poisoned forbidden input", accepted under
--masked-inputs finite): Property.SinksAgreeWithOracle through attncheck.adapters.openvino --op
paged, float32, shrunk to B 1, H 1, Tq 1, Tk 2, dk 1, dv 1, no causal mask, window (0, 0) (the op's
past_lens 1, sliding_window 1), sinks 0.453125: the query sees key 1 alone, value 0 is NaN, out NaN,
not 0. Without sinks too (below).

Shown with openvino 2026.4.1, numpy 2.3.5, CPU plugin, INFERENCE_PRECISION_HINT f32, f32 caches.
Run: VENV_PYTHON examples/openvino/repro_paged_window_value_nan.py. Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino.op import _PagedAttentionExtension

BLOCK = 32  # the CPU plugin's block size: it rewrites the caches' block dimension to 32


def paged_attention(q, k, v, past_k, past_v, scale, window):
    """OpenVINO's PagedAttentionExtension (CPU, f32) on one sequence, one head: q, k, v the new tokens
    [Tq, d], past_k, past_v [past, d] the keys and values already in the cache (one block); window the
    sliding window (0: none)."""
    (Tq, dk), dv, past = q.shape, v.shape[1], len(past_k)
    f32, i32 = ov.Type.f32, ov.Type.i32
    names = ["query", "key", "value", "key_cache", "value_cache", "past_lens", "subsequence_begins", "block_indices",
             "block_indices_begins", "scale", "max_context_len", "score_aggregation_window", "sliding_window"]
    types = [([-1, dk], f32), ([-1, dk], f32), ([-1, dv], f32), ([-1, 1, BLOCK, dk], f32), ([-1, 1, BLOCK, dv], f32),
             ([-1], i32), ([-1], i32), ([-1], i32), ([-1], i32), ([], f32), ([], i32), ([-1], i32), ([], i32)]
    p = {n: ops.parameter(s, t, name=n) for n, (s, t) in zip(names, types)}
    c = lambda a, t: ops.constant(np.array(a, t))  # noqa: E731
    no_f, no_i = np.zeros(0, np.float32), np.zeros(0, np.int32)
    inputs = [p[n] for n in names[:10]] + [
        p["sliding_window"], c(no_f, np.float32), p["max_context_len"], p["score_aggregation_window"],  # 10-13
        c(no_i, np.int32), c(no_i, np.int32), c(no_f, np.float32),  # 14-16 no cache rotation
        c(no_f, np.float32), c(64, np.int32), c(8, np.int32),  # 17-19 no XAttention
        c(no_f, np.float32),  # 20 no sinks
        c(0, np.int32), c(no_i, np.int32), c(no_i, np.int32), c(no_i, np.int32),  # 21-24 no adaptive R-KV
        c(no_i, np.int32), c(np.zeros(0, np.uint8), np.uint8), c(no_i, np.int32)]  # 25-27
    node = _PagedAttentionExtension([x.output(0) for x in inputs])
    rt = node.get_rt_info()  # the CPU plugin requires these
    rt["num_k_heads"], rt["k_head_size"], rt["num_v_heads"], rt["v_head_size"] = 1, dk, 1, dv
    model = ov.Core().compile_model(ov.Model([node.output(0)], [p[n] for n in names]), "CPU",
                                    {"INFERENCE_PRECISION_HINT": "f32", "KEY_CACHE_PRECISION": "f32",
                                     "VALUE_CACHE_PRECISION": "f32"})
    key_cache, value_cache = np.zeros((1, 1, BLOCK, dk), np.float32), np.zeros((1, 1, BLOCK, dv), np.float32)
    key_cache[0, 0, :past], value_cache[0, 0, :past] = past_k, past_v
    feeds = [q, k, v, key_cache, value_cache, np.array([past], np.int32), np.array([0, Tq], np.int32),
             np.array([0], np.int32), np.array([0, 1], np.int32), np.float32(scale), np.int32(past + Tq),
             np.zeros(1, np.int32), np.int32(window)]
    return model([np.asarray(x, dtype=getattr(x, "dtype", np.float32)) for x in feeds])[model.output(0)].ravel()


print(f"openvino {ov.__version__}, numpy {np.__version__}")
f = np.float32
seen = {}
for window, past, Tq in ((1, 1, 1), (2, 3, 1), (2, 3, 2)):
    for v0 in (0.0, np.nan, np.inf):
        # Key 0 in the cache is before every new token's window; the others' values are 5 (cache), 7 (new).
        past_k, past_v = np.zeros((past, 1), f), np.full((past, 1), 5.0, f)
        past_v[0] = v0
        out = paged_attention(np.zeros((Tq, 1), f), np.zeros((Tq, 1), f), np.full((Tq, 1), 7.0, f), past_k, past_v, 1.0,
                              window)
        seen[window, past, Tq, v0] = out
        print(f"sliding_window {window}, past {past}, {Tq} new: value of key 0 (outside every window) {v0}: out {out}")
clean = all(np.isfinite(out).all() for (w, p, t, v0), out in seen.items() if v0 == 0.0)
leaks = all(np.isnan(out).all() for (w, p, t, v0), out in seen.items() if v0 != 0.0)
print("reproduced: an inf or NaN value outside the window makes every output NaN" if clean and leaks
      else "not reproduced")
sys.exit(0 if clean and leaks else 1)
