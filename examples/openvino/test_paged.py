"""The OpenVINO paged adapter's translation (python/attncheck/adapters/openvino_paged.py) on small
problems computed in plain NumPy here, and what the adapter's docstring says of OpenVINO 2026.4's
CPU PagedAttentionExtension: KV-end causal over the cache and the new tokens, grouped KV heads, the
new keys written into the cache, the CPU plugin's block size of 32, the refusals.

Run: PYTHONPATH=python VENV_PYTHON -m pytest -q -p no:cacheprovider examples/openvino/test_paged.py
(skipped where openvino does not import).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
ov = pytest.importorskip("openvino")
from attncheck import _protocol as wire  # noqa: E402
from attncheck._problem import Problem  # noqa: E402
from attncheck.adapters import NotExpressible  # noqa: E402
from attncheck.adapters import openvino_paged as adapter  # noqa: E402


def paged_problem(q, k, v, causal, kv_lens=None, BS=0, poison=np.nan, seed=0, scale=0.0, sinks=None, dtype="f32",
                  window=(-1, -1)):
    """A Problem as the checker sends it: dense k [B,H_kv,Tk,dk], v, laid out (when BS > 0) in a pool of
    blocks of BS keys at shuffled places, one spare unused block, every slot no key fills = poison.
    dtype "f32" or "bf16" (the values then bf16's, sent as bf16 bits)."""
    q, k, v = (np.asarray(x, np.float32) for x in (q, k, v))
    B, H, Tq, dk = q.shape
    _, H_kv, Tk, dv = v.shape
    enc = (lambda x: wire.to_bf16_bits(np.asarray(x, np.float32)).tobytes()) if dtype == "bf16" else \
        (lambda x: np.asarray(x, np.float32).tobytes())  # noqa: E731
    tensors = dict(q=enc(q), kv_lens=None if kv_lens is None else np.asarray(kv_lens, "<i4").tobytes(),
                   sinks=None if sinks is None else np.asarray(sinks, "<f4").tobytes())
    fields = dict(zip(wire.PROBLEM_DIMS, (B, H, H_kv, Tq, Tk, dk, dv)), format={"f32": 0, "bf16": 3}[dtype],
                  causal={"none": 0, "upper-left": 1, "lower-right": 2, "kv-end": 3}[causal],
                  window_left=window[0], window_right=window[1], scale=scale)
    if BS:
        BPS = -(-Tk // BS)
        NB = B * BPS + 1
        place = np.random.default_rng(seed).permutation(NB).astype(np.int32)
        table = place[:B * BPS].reshape(B, BPS)
        kp = np.full((NB, H_kv, BS, dk), poison, np.float32)
        vp = np.full((NB, H_kv, BS, dv), poison, np.float32)
        for b in range(B):
            for j in range(kv_lens[b] if kv_lens is not None else Tk):
                kp[table[b, j // BS], :, j % BS] = k[b, :, j]
                vp[table[b, j // BS], :, j % BS] = v[b, :, j]
        tensors.update(k=enc(kp), v=enc(vp), block_table=table.tobytes())
        fields.update(NB=NB, BS=BS, BPS=BPS)
    else:
        tensors.update(k=enc(k), v=enc(v))
    flags, _, buffers = wire._inputs("forward", tensors)
    fields["flags"] = flags
    return Problem(wire.write_headers(fields) + buffers)


def reference(q, k, v, scale, pasts, sinks=None, window=0):
    """Plain NumPy in float64: query i of batch b sees keys 0 .. pasts[b] + i (the last `window` of
    them when window > 0); query head h reads KV head h // (H / H_kv); sinks[h] joins each row's
    denominator."""
    B, H, Tq, _ = q.shape
    H_kv = k.shape[1]
    k = np.repeat(k.astype(np.float64), H // H_kv, axis=1)
    v = np.repeat(v.astype(np.float64), H // H_kv, axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k)
    j = np.arange(k.shape[2])
    own = np.asarray(pasts)[:, None, None] + np.arange(Tq)[None, :, None]  # each query's own key
    seen = (j[None, None, :] <= own) & ((window == 0) | (j[None, None, :] > own - window))  # [B,Tq,Tk]
    s = np.where(seen[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, np.asarray(sinks, np.float64)[None, :, None, None])
    w = np.exp(s - m)
    den = w.sum(-1, keepdims=True)
    if sinks is not None:
        den = den + np.exp(np.asarray(sinks, np.float64)[None, :, None, None] - m)
    return (w / den) @ v


def test_one_decode_step_by_hand():
    # B 1, H 1, Tq 1, Tk 2, dk 2, dv 1, no causal mask (a decode step: the one query sees both keys).
    q = np.array([1, 0], np.float32).reshape(1, 1, 1, 2)
    k = np.array([[0, 0], [2, 0]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([1, 3], np.float32).reshape(1, 1, 2, 1)
    p = paged_problem(q, k, v, "none", scale=0.5)
    feeds, *_ = adapter.translate(p)
    assert feeds["past_lens"].tolist() == [1] and feeds["subsequence_begins"].tolist() == [0, 1]
    assert feeds["key"].tolist() == [[2, 0]] and feeds["value"].tolist() == [[3]]  # key 1 is the new token
    e = np.e  # scores 0.5 * (0, 2) = (0, 1): weights (1, e) / (1 + e)
    np.testing.assert_allclose(adapter.forward(p).ravel(), [(1 + 3 * e) / (1 + e)], rtol=1e-6)


@pytest.mark.parametrize("BS", [0, 1, 3, 16])
def test_kv_end_with_key_lengths_grouped_heads_and_a_poisoned_pool(BS):
    # B 3, H 4, H_kv 2, Tq 2, Tk 40 (a second block of 32 for batch 0), dk 8, dv 5, kv_lens 40, 2, 35.
    rng = np.random.default_rng(7)
    q = rng.standard_normal((3, 4, 2, 8)).astype(np.float32)
    k = rng.standard_normal((3, 2, 40, 8)).astype(np.float32)
    v = rng.standard_normal((3, 2, 40, 5)).astype(np.float32)
    kv_lens = [40, 2, 35]
    k_sent, v_sent = k.copy(), v.copy()
    for b, n in enumerate(kv_lens):  # what the checker puts past a batch's length: poison
        k_sent[b, :, n:], v_sent[b, :, n:] = np.nan, np.inf
    p = paged_problem(q, k_sent, v_sent, "kv-end", kv_lens=kv_lens, BS=BS, poison=np.float32(np.nan))
    feeds, *_ = adapter.translate(p)
    assert feeds["past_lens"].tolist() == [38, 0, 33] and feeds["block_indices_begins"].tolist() == [0, 2, 3, 5]
    out = adapter.forward(p)
    assert out.shape == (3, 4, 2, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, reference(q, k, v, 1 / np.sqrt(8), [38, 0, 33]), rtol=1e-5, atol=1e-6)


def test_lower_right_and_square_upper_left_are_the_ops_mask():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    p = paged_problem(q, k, v, "lower-right", BS=2, scale=0.25)
    np.testing.assert_allclose(adapter.forward(p), reference(q, k, v, 0.25, [2, 2]), rtol=1e-5, atol=1e-6)
    square = paged_problem(q, k[:, :, :3], v[:, :, :3], "upper-left", BS=5)
    assert adapter.translate(square)[0]["past_lens"].tolist() == [0, 0]
    np.testing.assert_allclose(adapter.forward(square), reference(q, k[:, :, :3], v[:, :, :3], 0.5, [0, 0]),
                               rtol=1e-5, atol=1e-6)


def test_the_op_writes_the_new_keys_into_its_cache_and_takes_blocks_of_32():
    q = np.ones((1, 1, 2, 2), np.float32)
    k = np.arange(6, dtype=np.float32).reshape(1, 1, 3, 2)
    p = paged_problem(q, k, k, "lower-right", BS=2)
    feeds, sinks, _ = adapter.translate(p)
    assert feeds["key_cache"].shape == (1, 1, 32, 2)  # one block of the CPU plugin's 32 slots
    assert feeds["key_cache"][0, 0, :3].tolist() == [[0, 1], [2, 3], [4, 5]]  # as the pool holds them
    assert np.isnan(feeds["key_cache"][0, 0, 3:]).all()  # slots the problem names no key in: NaN
    assert feeds["past_lens"].tolist() == [1] and feeds["key"].tolist() == [[2, 3], [4, 5]]
    feeds["key_cache"][0, 0, 1:3] = -7  # what the op does with the new tokens' slots
    model, names = adapter.compiled(1, 1, 2, 2, sinks)
    model([feeds[name] for name in names])
    assert feeds["key_cache"][0, 0, :3].tolist() == [[0, 1], [2, 3], [4, 5]]  # written by the op
    assert np.isnan(feeds["key_cache"][0, 0, 3:]).all()
    assert [tuple(i.get_partial_shape().to_string() for i in [model.input("key_cache")])] == [("[?,1,32,2]",)]


def test_sinks_join_each_rows_denominator():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 2, 1, 4)).astype(np.float32)
    k = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    v = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    sinks = np.array([0.5, -1.0], np.float32)
    p = paged_problem(q, k, v, "none", BS=2, sinks=sinks)
    np.testing.assert_allclose(adapter.forward(p), reference(q, k, v, 0.5, [2], sinks), rtol=1e-5, atol=1e-6)


def test_upper_left_with_fewer_queries_than_keys_is_a_sequence_of_tq_keys():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in ((1, 1, 2, 3), (1, 1, 5, 3), (1, 1, 5, 3)))
    p = paged_problem(q, k, v, "upper-left", BS=3)
    feeds, *_ = adapter.translate(p)
    assert feeds["past_lens"].tolist() == [0] and feeds["max_context_len"] == 2
    np.testing.assert_allclose(adapter.forward(p), reference(q, k, v, 1 / np.sqrt(3), [0]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal,Tq,kv_lens", [("none", 3, None), ("none", 3, [5, 2]), ("upper-left", 3, [5, 2]),
                                             ("kv-end", 2, [5, 3])])
def test_other_rows_are_decode_steps_over_the_same_blocks(causal, Tq, kv_lens):
    # Queries that are not one prefill: each its own sequence of one new token (past: its last key),
    # the batch's blocks shared; a batch that is one prefill stays one (kv-end here).
    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 2, Tq, 4)).astype(np.float32)
    k = rng.standard_normal((2, 1, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, 1, 5, 3)).astype(np.float32)
    p = paged_problem(q, k, v, causal, kv_lens=kv_lens, BS=3)
    feeds, _, order = adapter.translate(p)
    permitted = p.mask()  # [B,H,Tq,Tk]
    last = [[int(np.nonzero(permitted[b, 0, i])[0][-1]) for i in range(Tq)] for b in range(2)]
    assert sorted(order) == [(b, i) for b in range(2) for i in range(Tq)]
    if causal == "kv-end":  # both batches one prefill each
        assert feeds["past_lens"].tolist() == [3, 1] and feeds["subsequence_begins"].tolist() == [0, 2, 4]
    elif causal == "upper-left":  # batch 0 one prefill (past 0), batch 1's rows see keys 0, 0 .. 1, 0 .. 1
        assert feeds["past_lens"].tolist() == [0, 0, 1, 1] and feeds["subsequence_begins"].tolist() == [0, 3, 4, 5, 6]
    else:
        assert feeds["past_lens"].tolist() == [last[b][i] for b, i in order]  # one token each
    s = 0.5 * np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), np.repeat(k, 2, 1).astype(np.float64))
    s = np.where(permitted, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    expected = (w / w.sum(-1, keepdims=True)) @ np.repeat(v, 2, 1).astype(np.float64)
    np.testing.assert_allclose(adapter.forward(p), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal,Tq,Tk,kv_lens", [("kv-end", 3, 4, [4, 2]), ("lower-right", 3, 2, None)])
def test_a_query_with_no_key_is_not_expressible(causal, Tq, Tk, kv_lens):
    q = np.zeros((2, 1, Tq, 2), np.float32)
    k = np.zeros((2, 1, Tk, 2), np.float32)
    p = paged_problem(q, k, k, causal, kv_lens=kv_lens, BS=2)
    with pytest.raises(NotExpressible):
        adapter.translate(p)


def bf16(x):
    """x rounded to bf16 values (to nearest even), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)


@pytest.mark.skipif("BF16" not in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"),
                    reason="a CPU without bf16 runs the node in f32")
def test_bf16_runs_in_bf16_with_a_bf16_cache():
    rng = np.random.default_rng(5)
    q, k, v = (bf16(rng.standard_normal(shape)) for shape in ((2, 2, 3, 8), (2, 1, 35, 8), (2, 1, 35, 8)))
    p = paged_problem(q, k, v, "kv-end", kv_lens=[35, 4], BS=7, dtype="bf16")
    feeds, sinks, _ = adapter.translate(p)
    assert feeds["key_cache"].get_element_type() == ov.Type.bf16
    model, _ = adapter.compiled(2, 1, 8, 8, sinks, "bf16")
    assert model.input("key_cache").get_element_type() == ov.Type.bf16  # the plugin kept the cache bf16
    out = adapter.forward(p)
    assert out.dtype == np.float32 and np.array_equal(out, bf16(out))  # bf16 values
    np.testing.assert_allclose(out, reference(q, k, v, 1 / np.sqrt(8), [32, 1]), rtol=0, atol=3e-2)


@pytest.mark.parametrize("Tq", [1, 4])
def test_a_window_is_the_ops_sliding_window(Tq):
    # attncheck's window (left 2) with lower-right causal: query i sees keys i + Tk - Tq - 2 .. i + Tk - Tq,
    # the op's sliding_window 3 (each new token sees its own key and the 2 before it), decode and prefill.
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 2, Tq, 4)).astype(np.float32)
    k = rng.standard_normal((2, 1, 9, 4)).astype(np.float32)
    v = rng.standard_normal((2, 1, 9, 3)).astype(np.float32)
    p = paged_problem(q, k, v, "lower-right", BS=2, window=(2, 0))
    feeds, *_ = adapter.translate(p)
    assert feeds["sliding_window"] == 3 and feeds["past_lens"].tolist() == [9 - Tq] * 2
    np.testing.assert_allclose(adapter.forward(p), reference(q, k, v, 0.5, [9 - Tq] * 2, window=3), rtol=1e-5, atol=1e-6)
