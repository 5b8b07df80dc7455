"""A multi-head attention layer in NumPy, as D2L writes it: three linear maps, the heads split by a
reshape and a transpose, attention per head, the heads merged back and projected.

Check it: attncheck check --impl-cmd "python3 examples/python/numpy_layer.py"
With --planted-bug, the heads are merged without the transpose (out.reshape(B, Tq, H * dv) straight
from [B,H,Tq,dv]), and the check fails on the first layer with two heads.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck

PLANTED_BUG = "--planted-bug" in sys.argv


def linear(x, w, b):
    # x [B,T,D], w [D,n], b [n] or None; [B,T,n]
    return x @ w + (0 if b is None else b)


def split_heads(y, heads):
    # y [B,T,heads d]; [B,heads,T,d]
    B, T, width = y.shape
    return y.reshape(B, T, heads, width // heads).transpose(0, 2, 1, 3)


def layer(m):
    # m.x_q [B,Tq,D], m.x_kv [B,Tk,D], m.w_q [D,H dk], ..., m.w_o [H dv,D]; out [B,Tq,D], weights [B,H,Tq,Tk]
    q = split_heads(linear(m.x_q, m.w_q, m.b_q), m.H)            # [B,H,Tq,dk]
    k = split_heads(linear(m.x_kv, m.w_k, m.b_k), m.H_kv)        # [B,H_kv,Tk,dk]
    v = split_heads(linear(m.x_kv, m.w_v, m.b_v), m.H_kv)        # [B,H_kv,Tk,dv]
    k, v = (np.repeat(t, m.H // m.H_kv, axis=1) for t in (k, v))  # query head h reads KV head h // (H // H_kv)
    mask = m.mask()                                                # [B,H,Tq,Tk], True = may attend
    scores = np.where(mask, q @ k.swapaxes(-1, -2) * m.softmax_scale, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    e = np.where(mask, np.exp(scores - np.where(np.isfinite(top), top, 0)), 0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # a row with no permitted key: 0
    heads = weights @ v                                            # [B,H,Tq,dv]
    B, H, Tq, dv = heads.shape
    merged = heads.reshape(B, Tq, H * dv) if PLANTED_BUG else heads.transpose(0, 2, 1, 3).reshape(B, Tq, H * dv)
    out = linear(merged, m.w_o, m.b_o)
    return (out, weights) if m.want_weights else out


if __name__ == "__main__":
    attncheck.serve(layer=layer, capabilities={"f32", "f64", "allow", "causal", "kv_lens", "gqa", "window", "mha_weights"})
