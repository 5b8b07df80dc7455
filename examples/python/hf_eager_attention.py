"""Hugging Face transformers' eager attention (the eager_attention_forward of Llama and most models
since), in NumPy, with a -inf mask as a bool mask becomes in its SDPA path:

    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    attn_weights = attn_weights + causal_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)

Two things a float64 user meets: the softmax always runs in float32, so a float64 call comes back
with float32's error (1/3 as 0.333333343), and a row with no key to see is a softmax of -inf
alone: NaN. One --keep-going run reports both, apart:

  attncheck check --impl-cmd "python3 examples/python/hf_eager_attention.py" --keep-going
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck


def attention(p):
    # p.q [B,H,Tq,dk], p.k [B,H,Tk,dk], p.v [B,H,Tk,dv]; out [B,H,Tq,dv]
    query, key_states, value_states = p.q, p.k, p.v
    with np.errstate(invalid="ignore", over="ignore"):
        attn_weights = (query @ np.swapaxes(key_states, 2, 3)) * query.dtype.type(p.softmax_scale)
        attn_weights = attn_weights + np.where(p.mask(), 0, -np.inf).astype(query.dtype)
        scores = attn_weights.astype(np.float32)  # softmax(..., dtype=torch.float32)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn_weights = (scores / scores.sum(axis=-1, keepdims=True)).astype(query.dtype)
        return attn_weights @ value_states


if __name__ == "__main__":
    attncheck.serve(attention, capabilities={"f32", "f64", "allow", "causal", "kv_lens"})
