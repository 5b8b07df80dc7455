"""An inf or NaN in the value of a key that the causal mask forbids reaches the output of OpenVINO's
CPU PagedAttentionExtension: in a prefill (several new tokens in one call), new token 0 may not see
new token 1, yet token 1's inf or NaN value makes token 0's output NaN (its weight 0 times inf or
NaN is NaN). An inf or NaN in that forbidden token's key does not (its score is masked); a decode
step (one new token) has no forbidden key to leak. The slots of the cache past the sequence did not
leak in attncheck's campaign (PoisonedSlotsNeverReachAnOutput passed): this is the causal mask
inside the new tokens.

attncheck's finding (strict contract, kind "wrong special value", accepted under --masked-inputs
finite): Property.ForbiddenKeysAndValuesCannotChangeValidOutputs through
attncheck.adapters.openvino --op paged, shrunk to B 1, H 1, Tq 2, Tk 2, dk 1, dv 1, causal
upper-left (the op's past_lens 0, two new tokens): k 0 inf, v 0 inf, out[0,0,0,0] NaN, not 0.
The same class as repro_nan_in_forbidden_inputs.py (ScaledDotProductAttention's mask).

Shown with openvino 2026.4.1, numpy 2.3.5, CPU plugin, INFERENCE_PRECISION_HINT f32, f32 caches.
Run: VENV_PYTHON examples/openvino/repro_paged_forbidden_value_nan.py. Exit 0 when it reproduces, 1 otherwise.
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


print(f"openvino {ov.__version__}, numpy {np.__version__}")
f = np.float32
none = np.zeros((0, 1), f)
rows = {}
for k1, v1 in ((0.0, 5.0), (np.inf, 5.0), (np.nan, 5.0), (0.0, np.inf), (0.0, np.nan)):
    # Two new tokens, no past: token 0 sees key 0 alone (out 3), token 1 sees both.
    q = np.array([[1.0], [1.0]], f)
    k = np.array([[0.0], [k1]], f)
    v = np.array([[3.0], [v1]], f)
    rows[(k1, v1)] = paged_attention(q, k, v, none, none, 1.0)[0]
    print(f"prefill, key 1 = {k1}, value 1 = {v1}: token 0's out {rows[(k1, v1)]} (the contract: 3)")
finite_ok = all(rows[key] == 3 for key in ((0.0, 5.0), (np.inf, 5.0), (np.nan, 5.0)))
leaks = all(np.isnan(rows[key]) for key in ((0.0, np.inf), (0.0, np.nan)))
ok = finite_ok and leaks
print("reproduced: a forbidden value's inf or NaN makes token 0 NaN; a forbidden key's does not" if ok
      else "not reproduced")
sys.exit(0 if ok else 1)
