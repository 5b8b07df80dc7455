"""A split-KV decode kernel with attention sinks in NumPy, as flash-decoding computes it: the keys
in chunks of 4, each chunk's softmax partial (its maximum, sum and weighted values) merged by their
log-sum-exp, and each head's sink logit (gpt-oss) joining the denominator at the end, with no value;
it takes the KV-end causal mask (p.mask() reads it) for a KV cache, dense or paged (p.k and p.v pools
of blocks read through p.block_table), and packed sequences (varlen: p.q [H,Tq,dk], p.k and p.v
[H_kv,Tk,d] computed as one batch under p.mask()'s mask of the packed rows, each sequence's own).

Check it (the sinks properties run because it claims "sinks"):
    attncheck check --impl-cmd "python3 examples/python/decode_with_sinks.py"
and see planted bugs caught, the sink taken and ignored (vllm 52148), and a paged cache's block
table ignored (the pool read in table order):
    attncheck check --impl-cmd "python3 examples/python/decode_with_sinks.py --bug sink-ignored"
    attncheck check --impl-cmd "python3 examples/python/decode_with_sinks.py --bug table-ignored"
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck

CHUNK = 4  # keys per split


def dense_cache(p, bug=None):
    """p.k and p.v as [B,H_kv,Tk,d]: themselves, or gathered from pools [NB,H_kv,BS,d] through
    p.block_table [B,BPS]: key j of batch b is slot j % BS of block block_table[b, j // BS] (with
    the planted bug, block b BPS + j // BS of the pool, as if it were laid out in table order)."""
    if not p.BS:
        return p.k, p.v
    j = np.arange(p.Tk)
    entries = np.arange(p.B)[:, None] * p.BPS + j // p.BS
    blocks = entries % p.NB if bug == "table-ignored" else p.block_table[:, j // p.BS]
    slots = (j % p.BS)[None, :]  # [B,Tk] each
    return (np.swapaxes(pool[blocks, :, slots, :], 1, 2) for pool in (p.k, p.v))  # [B,Tk,H_kv,d] to [B,H_kv,Tk,d]


def attention(p, bug=None):
    # p.q [B,H,Tq,dk], p.k and p.v [B,H_kv,Tk,d] (or pools), p.sinks None or [H]; out [B,H,Tq,dv], lse [B,H,Tq]
    # (varlen: p.q [H,Tq,dk], p.k and p.v [H_kv,Tk,d]; out [H,Tq,dv] and lse [H,Tq]: one batch of packed rows)
    group = p.H // p.H_kv
    k, v = dense_cache(p, bug)
    q, k, v = (x[None] for x in (p.q, k, v)) if p.S else (p.q, k, v)
    k = np.repeat(k, group, axis=1)  # query head h reads KV head h // group
    v = np.repeat(v, group, axis=1)
    mask = p.mask()  # [B,H,Tq,Tk]
    scores = np.where(mask, q @ np.swapaxes(k, -1, -2) * p.softmax_scale, -np.inf)
    mask = mask & (scores != -np.inf)  # a -inf score weighs nothing, as a masked key
    shape = scores.shape[:-1]
    m, l, acc = np.full(shape, -np.inf), np.zeros(shape), np.zeros(shape + (p.dv,))
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, p.Tk, CHUNK):  # each chunk's partial, then merged by its maximum
            s, keep = scores[..., start:start + CHUNK], mask[..., start:start + CHUNK]
            m_c = s.max(axis=-1, initial=-np.inf)
            e = np.where(keep, np.exp(s - np.where(np.isfinite(m_c), m_c, 0)[..., None]), 0)
            terms = np.where(keep[..., None], e[..., None] * v[:, :, None, start:start + CHUNK, :], 0)
            m_new = np.maximum(m, m_c)
            old = np.where(m == -np.inf, 0, np.exp(m - m_new))
            new = np.where(m_c == -np.inf, 0, np.exp(m_c - m_new))
            l = l * old + e.sum(axis=-1) * new
            acc = acc * old[..., None] + terms.sum(axis=-2) * new[..., None]
            m = m_new
        if p.sinks is not None and bug != "sink-ignored":  # the sink: one more term of l, no value
            sink = p.sinks.astype(np.float64)[None, :, None]
            m_new = np.maximum(m, sink)
            old = np.where(m == -np.inf, 0, np.exp(m - m_new))
            l = l * old + np.where(sink == -np.inf, 0, np.exp(sink - m_new))
            acc = acc * old[..., None]
            m = m_new
        out = np.where((l > 0)[..., None], acc / np.where(l > 0, l, 1)[..., None], 0)  # a row of nothing: 0
        lse = np.where(l > 0, m + np.log(np.where(l > 0, l, 1)), -np.inf)
        nan_row = np.isnan(scores).any(axis=-1) | (mask & (scores == np.inf)).any(axis=-1)
    out[nan_row], lse[nan_row] = np.nan, np.nan  # a NaN or +inf permitted score: the row is NaN
    dtype = np.float64 if p.dtype == "f64" else np.float32
    out, lse = (out[0], lse[0]) if p.S else (out, lse)
    return (out.astype(dtype), lse.astype(dtype)) if p.want_lse else out.astype(dtype)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bug", choices=["sink-ignored", "table-ignored"], help="a planted bug")
    bug = parser.parse_args().bug
    attncheck.serve(lambda p: attention(p, bug),
                    capabilities={"f32", "f64", "allow", "causal", "kv_lens", "gqa", "window", "lse", "sinks", "kv_cache",
                                  "paged_kv", "varlen"})
