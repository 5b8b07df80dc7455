"""OpenVINO's CPU PagedAttentionExtension gives one query two answers, by the path it takes: a row
whose score is q.k = (-inf) + (+inf) in float32 arithmetic (two products that overflow with
opposite signs; the exact score, 2.5e58 after the scale, overflows float32 to +inf) is NaN in a
decode step (one new token, the other key in the cache), as attncheck's contract has it (a NaN or
+inf permitted score makes the row NaN), but finite in a prefill (both tokens new): the key with
that score gets weight 0 there, the row is the other key's value. A plain +inf score (one
product overflowing) or a NaN key is NaN on both paths.

attncheck's finding (strict contract, kind "broke a relation"): Property.DecodeEqualsPrefill
through attncheck.adapters.openvino --op paged, float32, B 1, H 1, Tk 2, dk 4, dv 1, default scale:
q = (-2^63, 2^82, 0, 0), key 1 = (2^65, 2^113, 0, 0): the decode of the last query (KV-end causal,
kv_lens 2: the op's past_lens 1) is NaN, row 1 of the causal prefill of the same keys (past_lens
0, two new tokens) is 0 (v = 0, 0).

Shown with openvino 2026.4.1, numpy 2.3.5, CPU plugin, INFERENCE_PRECISION_HINT f32, f32 caches.
Run: VENV_PYTHON examples/openvino/repro_paged_prefill_swallows_nan_score.py. Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino.op import _PagedAttentionExtension

BLOCK = 32  # the CPU plugin's block size: it rewrites the caches' block dimension to 32


def paged_attention(q, k, v, past_k, past_v, scale):
    """OpenVINO's PagedAttentionExtension (CPU, f32) on one sequence, one head: q, k, v the new tokens
    [Tq, d], past_k, past_v [past, d] the keys and values already in the cache (one block)."""
    (Tq, dk), dv, past = q.shape, v.shape[1], len(past_k)
    f32, i32 = ov.Type.f32, ov.Type.i32
    names = ["query", "key", "value", "key_cache", "value_cache", "past_lens", "subsequence_begins", "block_indices",
             "block_indices_begins", "scale", "max_context_len", "score_aggregation_window"]
    types = [([-1, dk], f32), ([-1, dk], f32), ([-1, dv], f32), ([-1, 1, BLOCK, dk], f32), ([-1, 1, BLOCK, dv], f32),
             ([-1], i32), ([-1], i32), ([-1], i32), ([-1], i32), ([], f32), ([], i32), ([-1], i32)]
    p = {n: ops.parameter(s, t, name=n) for n, (s, t) in zip(names, types)}
    c = lambda a, t: ops.constant(np.array(a, t))  # noqa: E731
    no_f, no_i = np.zeros(0, np.float32), np.zeros(0, np.int32)
    inputs = [p[n] for n in names[:10]] + [
        c(0, np.int32), c(no_f, np.float32), p["max_context_len"], p["score_aggregation_window"],  # 10-13
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
             np.zeros(1, np.int32)]
    return model([np.asarray(x, dtype=getattr(x, "dtype", np.float32)) for x in feeds])[model.output(0)].ravel()


def both_paths(q1, k1, v, scale):
    """(row 1 of a prefill of keys 0 and 1, the decode of query q1 with key 0 in the cache): q0 = q1, key 0 = 0."""
    q = np.stack([q1, q1]).astype(np.float32)
    k = np.stack([np.zeros_like(k1), k1]).astype(np.float32)
    prefill = paged_attention(q, k, v, np.zeros((0, k.shape[1]), np.float32), np.zeros((0, 1), np.float32), scale)
    decode = paged_attention(q[1:], k[1:], v[1:], k[:1], v[:1], scale)
    return prefill[1], decode[0]


print(f"openvino {ov.__version__}, numpy {np.__version__}")
v = np.array([[1.0], [2.0]], np.float32)
cases = {"q.k1 = (-inf) + (+inf)": ([-2.0**63, 2.0**82, 0, 0], [2.0**65, 2.0**113, 0, 0]),
         "q.k1 = +inf (one product overflows)": ([2.0**63, 0, 0, 0], [2.0**70, 0, 0, 0]),
         "key 1 NaN": ([1, 0, 0, 0], [np.nan, 0, 0, 0])}
seen = {}
for name, (q1, k1) in cases.items():
    seen[name] = both_paths(np.array(q1, np.float64), np.array(k1, np.float64), v, 0.5)
    print(f"{name}: prefill row 1 {seen[name][0]}, decode {seen[name][1]} (the contract: NaN; values 1, 2)")
prefill, decode = seen["q.k1 = (-inf) + (+inf)"]
others_nan = all(np.isnan(x) for name, pair in seen.items() if name != "q.k1 = (-inf) + (+inf)" for x in pair)
ok = np.isnan(decode) and np.isfinite(prefill) and others_nan
print(f"reproduced: the prefill's row is {prefill}, the decode's NaN" if ok else "not reproduced")
sys.exit(0 if ok else 1)
