"""Attention in PyTorch with matmul, masked_fill and softmax, dropout on the weights, and its backward
by autograd.

Check it: attncheck check --impl-cmd "python3 examples/python/torch_attention.py"
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck

torch.set_num_threads(1)  # the checker runs one case at a time; threads only add start-up cost


def tensors(p):
    """q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] as torch tensors: float64 for f64, float32 otherwise
    (f16 and bf16 are computed in float32; the client rounds the result to the format)."""
    dtype = torch.float64 if p.dtype == "f64" else torch.float32
    return [torch.tensor(np.array(x), dtype=dtype) for x in (p.q, p.k, p.v)]


def attention(p, q, k, v):
    # q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] -> out [B,H,Tq,dv], lse [B,H,Tq], keep [B,H,Tq,Tk] or None
    group = p.H // p.H_kv
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # [B,H,Tk,*]
    mask = torch.tensor(p.mask())                                             # [B,H,Tq,Tk]
    bias = None if p.bias is None else torch.tensor(np.array(p.bias), dtype=q.dtype)
    if bias is not None:
        mask = mask & (bias != float("-inf"))
    # Each query meets only the keys and values it may see: a forbidden one, even NaN or inf, never
    # enters its arithmetic (0 * NaN is NaN, forwards and backwards).
    zero = torch.zeros((), dtype=q.dtype)
    k_seen = torch.where(mask.unsqueeze(-1), k.unsqueeze(2), zero)            # [B,H,Tq,Tk,dk]
    scores = (q.unsqueeze(3) @ k_seen.transpose(-1, -2)).squeeze(3) * p.softmax_scale  # [B,H,Tq,Tk]
    scores = torch.where(mask, scores, zero)  # a NaN q times a zeroed key must not reach tanh's derivative
    if p.softcap is not None:
        scores = p.softcap * torch.tanh(scores / p.softcap)
    if bias is not None:
        scores = scores + torch.where(mask, bias, zero)
    # A -inf score (an inf in q or k) weighs nothing, as a masked key: a row of only such keys is empty.
    mask = mask & (scores != float("-inf")).detach()
    v_seen = torch.where(mask.unsqueeze(-1), v.unsqueeze(2), zero)            # [B,H,Tq,Tk,dv]
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0)  # a row with no permitted key: 0, not NaN
    keep = None
    if p.dropout_p:
        # A generator of its own, seeded by the problem: the same seed gives the same mask, forwards and
        # backwards, whatever else drew from torch's default one.
        generator = torch.Generator().manual_seed(p.dropout_seed)
        keep = torch.rand(weights.shape, generator=generator, dtype=torch.float64) >= p.dropout_p
        weights = torch.where(keep, weights / (1 - p.dropout_p), zero)
    out = (weights.unsqueeze(3) @ v_seen).squeeze(3)
    lse = torch.logsumexp(scores, dim=-1)  # +inf for a row with a +inf score, whose softmax is NaN:
    return out, lse.masked_fill(torch.isposinf(lse), float("nan")), keep  # the contract's lse is NaN there


def forward(p):
    out, lse, keep = attention(p, *tensors(p))
    if p.want_keep:
        return (out, lse, keep) if p.want_lse else (out, keep)
    return (out, lse) if p.want_lse else out


def backward(p, dout):
    # dout [B,H,Tq,dv] -> dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv]
    q, k, v = (t.requires_grad_() for t in tensors(p))
    out = attention(p, q, k, v)[0]
    out.backward(torch.tensor(np.array(dout), dtype=out.dtype))
    return q.grad, k.grad, v.grad


CAPABILITIES = {"f32", "f64", "f16", "bf16", "allow", "causal", "kv_lens", "gqa", "window", "softcap", "bias", "lse",
                "dropout", "dropout_mask"}

if __name__ == "__main__":
    attncheck.serve(forward, capabilities=CAPABILITIES, backward=backward)
