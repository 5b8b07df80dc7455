"""Causal self-attention as nanoGPT's CausalSelfAttention computes it (its manual path), in NumPy:
q @ k^T / sqrt(head size), the lower triangle kept, a softmax, the weights times the values. Such
code takes causal self-attention only: Tq = Tk, one alignment, the default scale, one head width
for q, k and v. It says so (restrictions=), and attncheck sends it nothing else.

Its softmax keeps nanoGPT's care (the row maximum subtracted first), and its weighted sum reads
only the keys a query may see: att @ v would multiply a future key's NaN by weight 0, and a
future token's value must never reach a past one, NaN or not.

  attncheck check --impl-cmd "python3 examples/python/nanogpt_attention.py"
  attncheck check --impl-cmd "python3 examples/python/nanogpt_attention.py --planted-bug"

--planted-bug starts the running maximum at -10000, as llm.c's attention_forward does (`float
maxval = -10000.0f; // TODO something better`): a query whose scores all lie below about -10088
gets exp(s - max) = 0 for every key, and llm.c's `expsum == 0 ? 0 : 1 / expsum` outputs 0.
"""
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck

PLANTED_BUG = "--planted-bug" in sys.argv[1:]


def attention(p):
    # p.q, p.k, p.v [B,H,T,hs] (T = Tq = Tk, hs = dk = dv); out [B,H,T,hs]
    q, k, v = p.q, p.k, p.v
    T = q.shape[2]
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf and 0 * inf in rows the contract makes NaN
        att = (q @ np.swapaxes(k, -1, -2)) * np.float32(1.0 / math.sqrt(k.shape[-1]))   # [B,H,T,T]
        causal = np.tril(np.ones((T, T), dtype=bool))
        att = np.where(causal, att, -np.inf)
        top = att.max(axis=-1, keepdims=True)      # NaN wins: a NaN score makes its row NaN
        if PLANTED_BUG:
            top = np.maximum(top, np.float32(-10000.0))
        weighed = (att != -np.inf).any(axis=-1, keepdims=True) | np.isnan(top)
        top = np.where(weighed, top, 0)            # a row of -inf scores alone weighs nothing: out 0
        e = np.exp(att - top)
        total = e.sum(axis=-1, keepdims=True)
        inverse = np.where(total == 0, 0, 1 / np.where(total == 0, 1, total)) if PLANTED_BUG else 1 / total
        att = np.where(weighed, e * inverse, 0).astype(q.dtype)
        out = np.zeros_like(q, shape=(*q.shape[:3], v.shape[-1]))
        for t in range(T):  # query t reads keys 0..t alone
            out[:, :, t] = np.einsum("bhj,bhjd->bhd", att[:, :, t, :t + 1], v[:, :, :t + 1])
    return out


if __name__ == "__main__":
    attncheck.serve(attention, capabilities={"f32", "causal"},
                    restrictions=["causal", "square", "default_scale", "equal_head_dims"])
