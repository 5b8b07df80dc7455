"""The tests' float64 NumPy reference of the multi-head attention layer, written from
docs/protocol.md ("A layer call"), and their one way to make a Layer by hand: through the
protocol's own payload (attncheck._protocol.layer_payload), as the checker sends it.

    Q = x_q w_q + b_q, K = x_kv w_k + b_k, V = x_kv w_v + b_v   (a missing bias is zero)
    head h: columns h dk .. h dk + dk - 1 of Q (h dv .. of V), KV head h // (H // H_kv)
    head_h = softmax(scale Q_h K_h^T over the permitted keys) V_h
    out = concat_h(head_h) w_o + b_o
A row with no permitted key has head 0 (so out is b_o) and weights 0; a forbidden key's weight is 0.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the client, from the source tree
from attncheck import _protocol as wire  # noqa: E402
from attncheck._layer import Layer  # noqa: E402


def reference(m, empty_rows="zero"):
    """(out [B,Tq,D], weights [B,H,Tq,Tk]) in float64 for the Layer m (anything with its fields).
    empty_rows "nan" gives a row with no permitted key NaN heads and weights instead of 0."""
    f = lambda x: None if x is None else np.asarray(x, np.float64)
    x_q, x_kv = f(m.x_q), f(m.x_kv)
    B, H, H_kv, Tq, Tk, dk, dv = m.B, m.H, m.H_kv, m.Tq, m.Tk, m.dk, m.dv
    Q = x_q @ f(m.w_q) + (0 if m.b_q is None else f(m.b_q))    # [B,Tq,H dk]
    K = x_kv @ f(m.w_k) + (0 if m.b_k is None else f(m.b_k))   # [B,Tk,H_kv dk]
    V = x_kv @ f(m.w_v) + (0 if m.b_v is None else f(m.b_v))   # [B,Tk,H_kv dv]
    Q = Q.reshape(B, Tq, H, dk).transpose(0, 2, 1, 3)          # [B,H,Tq,dk]
    K = K.reshape(B, Tk, H_kv, dk).transpose(0, 2, 1, 3)
    V = V.reshape(B, Tk, H_kv, dv).transpose(0, 2, 1, 3)
    group = H // H_kv
    K, V = np.repeat(K, group, axis=1), np.repeat(V, group, axis=1)  # query head h reads KV head h // group
    permitted = m.mask()                                             # [B,H,Tq,Tk]
    scores = m.softmax_scale * (Q @ K.transpose(0, 1, 3, 2))
    with np.errstate(all="ignore"):
        s = np.where(permitted, scores, -np.inf)
        top = s.max(axis=-1, keepdims=True)
        e = np.where(permitted, np.exp(s - np.where(np.isfinite(top), top, 0)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        empty = ~permitted.any(axis=-1, keepdims=True)
        weights = np.where(empty, np.nan if empty_rows == "nan" else 0.0, e / np.where(total > 0, total, 1))
        heads = weights @ V                                           # [B,H,Tq,dv]
        merged = heads.transpose(0, 2, 1, 3).reshape(B, Tq, H * dv)
        out = merged @ f(m.w_o) + (0 if m.b_o is None else f(m.b_o))
    return out, weights


def _encode(dtype, x):
    x = np.asarray(x)
    if dtype == "bf16":
        return wire.to_bf16_bits(np.asarray(x, np.float32)).tobytes()
    return np.ascontiguousarray(x, wire.STORAGE[dtype]).tobytes()


def layer(x_q, w_q, w_k, w_v, w_o, H, H_kv=None, x_kv=None, b_q=None, b_k=None, b_v=None, b_o=None, dtype="f32",
          causal="none", window=None, scale=0.0, allow=None, kv_lens=None, want_weights=False):
    """A Layer as the checker sends it, its payload as .payload. x_kv None is self-attention;
    dk = w_q's columns / H, dv = w_v's / H_kv."""
    H_kv = H if H_kv is None else H_kv
    x_q = np.asarray(x_q, np.float64)
    B, Tq, D = x_q.shape
    Tk = Tq if x_kv is None else np.asarray(x_kv).shape[1]
    dk, dv = np.asarray(w_q).shape[1] // H, np.asarray(w_v).shape[1] // H_kv
    e = lambda x: None if x is None else _encode(dtype, x)
    payload = wire.layer_payload(
        dtype, (B, H, H_kv, Tq, Tk, dk, dv), D, causal, window, scale, x_q=e(x_q), x_kv=e(x_kv), w_q=e(w_q),
        w_k=e(w_k), w_v=e(w_v), w_o=e(w_o), b_q=e(b_q), b_k=e(b_k), b_v=e(b_v), b_o=e(b_o),
        allow=None if allow is None else np.asarray(allow, np.uint8).tobytes(),
        kv_lens=None if kv_lens is None else np.asarray(kv_lens, "<i4").tobytes(), want_weights=want_weights)
    m = Layer(payload)
    m.payload = payload  # the tests' own: what a served function is sent
    return m


def random_layer(rng, B=2, H=2, H_kv=None, Tq=3, Tk=None, D=4, dk=None, dv=None, cross=False, biases="qkvo",
                 dtype="f32", **options):
    """A Layer with standard normal inputs and weights of 1/sqrt(D) scale; biases: which of q, k, v, o."""
    H_kv = H if H_kv is None else H_kv
    dk = D // H if dk is None else dk
    dv = dk if dv is None else dv
    Tk = (Tk or Tq) if cross else Tq
    n = lambda *shape, s=1.0: rng.standard_normal(shape) * s
    w = 1 / np.sqrt(D)
    return layer(n(B, Tq, D), n(D, H * dk, s=w), n(D, H_kv * dk, s=w), n(D, H_kv * dv, s=w), n(H * dv, D, s=w), H,
                 H_kv, x_kv=n(B, Tk, D) if cross else None,
                 b_q=n(H * dk, s=0.5) if "q" in biases else None, b_k=n(H_kv * dk, s=0.5) if "k" in biases else None,
                 b_v=n(H_kv * dv, s=0.5) if "v" in biases else None, b_o=n(D, s=0.5) if "o" in biases else None,
                 dtype=dtype, **options)
