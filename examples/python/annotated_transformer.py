"""The Annotated Transformer's attention() (Harvard NLP), in NumPy, as the notebook writes it:

    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn

It has no scale argument (restrictions=["default_scale"]), and it fills forbidden scores with
-1e9, a finite value: a row with no key to see averages them all, a NaN where no query looks
leaks through p_attn @ value (0 * NaN), and a permitted score below -1e9 loses to the forbidden
keys. The first two are conventions a policy names; the last is a bug, which attncheck's run
names with the value it reads off:

  attncheck check --impl-cmd "python3 examples/python/annotated_transformer.py" --keep-going
"""
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck


def attention(p):
    # p.q [B,H,Tq,dk], p.k [B,H,Tk,dk], p.v [B,H,Tk,dv]; out [B,H,Tq,dv]
    query, key, value, mask = p.q, p.k, p.v, p.mask()
    d_k = query.shape[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        scores = query @ np.swapaxes(key, -2, -1) / np.float32(math.sqrt(d_k))
        scores = np.where(mask == 0, np.float32(-1e9), scores)
        scores = scores - scores.max(axis=-1, keepdims=True)  # torch's softmax is stable
        p_attn = np.exp(scores)
        p_attn = p_attn / p_attn.sum(axis=-1, keepdims=True)
        return (p_attn @ value).astype(query.dtype)


if __name__ == "__main__":
    attncheck.serve(attention, capabilities={"f32", "allow", "causal", "kv_lens"}, restrictions=["default_scale"])
