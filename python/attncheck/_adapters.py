"""Adapters from the signatures attention code is written with to forward(p)."""
import math

import numpy as np


class masked:
    """forward(p) from fn(Q, K, V, mask) -> out, CS336's adapter signature.

    Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv] (grouped KV heads repeated to H), mask bool
    [B,H,Tq,Tk] with True = may attend (p.mask()). fn applies 1/sqrt(dk) itself, so a problem
    with another scale has Q multiplied by scale * sqrt(dk) first (in float64, then rounded once).
    tensors="torch" hands fn torch tensors. Claims float32 and float64, every mask, and GQA.
    """

    capabilities = {"f32", "f64", "allow", "causal", "kv_lens", "window", "gqa"}

    def __init__(self, fn, tensors="numpy"):
        if tensors not in ("numpy", "torch"):
            raise ValueError(f"tensors must be 'numpy' or 'torch', not {tensors!r}")
        self.fn = fn
        self.tensors = tensors
        self.__name__ = getattr(fn, "__name__", "masked")

    def __call__(self, p):
        q, k, v = p.q, p.k, p.v
        if p.scale is not None:
            q = (q.astype(np.float64) * (p.scale * math.sqrt(p.dk))).astype(q.dtype)
        if p.H_kv != p.H:
            k = np.repeat(k, p.H // p.H_kv, axis=1)
            v = np.repeat(v, p.H // p.H_kv, axis=1)
        mask = p.mask()
        if self.tensors == "torch":
            import torch
            q, k, v, mask = (torch.tensor(np.array(x)) for x in (q, k, v, mask))
        return self.fn(q, k, v, mask)
