"""Adapters from the signatures attention code is written with to forward(p)."""
import math

import numpy as np

from ._serve import _numpy

# The most elements of one call's per-query keys or values (K and V are widened per query below).
_LARGEST_CALL = 1 << 22


class masked:
    """forward(p) from fn(Q, K, V, mask) -> out, CS336's adapter signature.

    fn gets Q [..., queries, dk], K [..., keys, dk], V [..., keys, dv] and mask bool [..., queries,
    keys] (True = may attend) and applies 1/sqrt(dk) itself. Such a function promises that a masked
    key gets weight 0, not that a masked value cannot reach the output (0 * NaN is NaN), so each
    query is handed over alone, as a batch of one-query problems ([B,H,Tq,1,*]), with the keys and
    values it may not see zeroed. Grouped KV heads are repeated to H; a problem with another scale
    has Q multiplied by scale * sqrt(dk) first (in float64, rounded once). tensors="torch" hands fn
    torch tensors. Claims float32 and float64, every mask, and GQA.
    """

    capabilities = {"f32", "f64", "allow", "causal", "kv_lens", "window", "gqa"}

    def __init__(self, fn, tensors="numpy"):
        if tensors not in ("numpy", "torch"):
            raise ValueError(f"tensors must be 'numpy' or 'torch', not {tensors!r}")
        self.fn = fn
        self.tensors = tensors
        self.__name__ = getattr(fn, "__name__", "masked")

    def __call__(self, p):
        # p.q [B,H,Tq,dk], p.k [B,H_kv,Tk,dk], p.v [B,H_kv,Tk,dv] -> out [B,H,Tq,dv]
        q, k, v = p.q, p.k, p.v
        if p.scale is not None:
            q = (q.astype(np.float64) * (p.scale * math.sqrt(p.dk))).astype(q.dtype)
        if p.H_kv != p.H:
            k = np.repeat(k, p.H // p.H_kv, axis=1)
            v = np.repeat(v, p.H // p.H_kv, axis=1)
        mask = p.mask()                                                  # [B,H,Tq,Tk]
        step = max(1, _LARGEST_CALL // max(1, p.B * p.H * p.Tk * max(p.dk, p.dv)))
        outs = []
        for start in range(0, p.Tq, step):
            rows = slice(start, start + step)
            seen = mask[:, :, rows, :, None]                             # [B,H,n,Tk,1]
            args = (q[:, :, rows, None, :],                              # [B,H,n,1,dk]
                    np.where(seen, k[:, :, None], 0).astype(k.dtype),    # [B,H,n,Tk,dk]
                    np.where(seen, v[:, :, None], 0).astype(v.dtype),    # [B,H,n,Tk,dv]
                    mask[:, :, rows, None, :])                           # [B,H,n,1,Tk]
            if self.tensors == "torch":
                import torch
                args = [torch.tensor(np.array(a)) for a in args]
            outs.append(_numpy(self.fn(*args), "out")[:, :, :, 0, :])  # [B,H,n,dv]
        return np.concatenate(outs, axis=2)
