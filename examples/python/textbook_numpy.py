"""Attention as the textbook writes it: scores, forbidden ones -inf, softmax, then weights @ v.

weights @ v multiplies every value, the forbidden ones too, by its weight: a forbidden value's 0
weight times a NaN or inf in it is NaN, which reaches a valid row (PyTorch's math path, ONNX
Runtime and FlashAttention compute so). Under the strict contract attncheck flags it; a user whose
padding is always finite says so with --masked-inputs finite, and then it passes:

  attncheck check --impl-cmd "python3 examples/python/textbook_numpy.py" --masked-inputs finite
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
    mask = mask & (scores != -np.inf)  # a -inf score weighs nothing, as a masked key
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):  # -inf - -inf in a row with no permitted key
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = weights / weights.sum(axis=-1, keepdims=True)
    weights = np.where(mask.any(axis=-1, keepdims=True), weights, 0)  # a row with no permitted key gives 0
    return weights @ p.v


if __name__ == "__main__":
    attncheck.serve(attention, capabilities={"f32", "f64", "allow", "causal", "kv_lens", "window"})
