"""Attention in NumPy, written as a course student would: scores, mask, softmax, weighted sum.

Check it: attncheck check --impl-cmd "python3 examples/python/student_numpy.py" 
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck


def attention(p):
    # p.q [B,H,Tq,dk], p.k [B,H,Tk,dk], p.v [B,H,Tk,dv]; out [B,H,Tq,dv]
    mask = p.mask()                                             # [B,H,Tq,Tk], True = may attend
    scores = p.q @ np.swapaxes(p.k, -1, -2) * p.softmax_scale   # [B,H,Tq,Tk]
    mask = mask & (scores != -np.inf)  # a -inf score (an inf in q or k) weighs nothing, as a masked key
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):  # -inf - -inf in a row with no permitted key; 0 * inf below
        scores = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights = weights / weights.sum(axis=-1, keepdims=True)
        # Not weights @ v: a value the query may not see must not reach its output, even as NaN or
        # inf (0 * NaN is NaN). Summing only permitted keys also gives a row with none of them 0.
        terms = np.where(mask[..., None], weights[..., None] * p.v[:, :, None, :, :], 0)  # [B,H,Tq,Tk,dv]
    return terms.sum(axis=-2)


if __name__ == "__main__":
    attncheck.serve(attention, capabilities={"f32", "f64", "allow", "causal", "kv_lens", "window"})
