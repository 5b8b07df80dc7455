"""A CS336-style adapter, run_scaled_dot_product_attention(Q, K, V, mask), checked through
attncheck.masked; and the same function with four classic course bugs planted, each named as its
twin in the mutant catalog (docs/checking.md).

Check it:      attncheck check --impl-cmd "python3 examples/python/cs336_adapter.py" --empty-rows nan
A planted bug: attncheck check --impl-cmd "python3 examples/python/cs336_adapter.py inverted_polarity" --empty-rows nan
A row whose keys are all masked comes out NaN (the softmax of -inf alone), hence --empty-rows nan.
"""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck

torch.set_num_threads(1)


def attention(Q, K, V, mask=None, bug=None):
    # Q [..., queries, d_k], K [..., keys, d_k], V [..., keys, d_v], mask bool [..., queries, keys]
    d_k = Q.shape[-1]
    if bug == "model_width_scale":  # 1/sqrt(d_model), d_model = heads * d_k, with Q [batch, heads, ...]
        d_k = Q.shape[1] * Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        keep = ~mask if bug == "inverted_polarity" else mask
        scores = scores.masked_fill(~keep, -1e9 if bug == "sentinel_1e9" else float("-inf"))
    weights = torch.softmax(scores, dim=-2 if bug == "softmax_over_queries" else -1)
    return weights @ V


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return attention(Q, K, V, mask)


# The planted bugs, each a function of its own so that attncheck.check can find it by name.
def inverted_polarity(Q, K, V, mask=None):  # True read as "masked out"
    return attention(Q, K, V, mask, bug="inverted_polarity")


def sentinel_1e9(Q, K, V, mask=None):  # a finite -1e9 for masked scores
    return attention(Q, K, V, mask, bug="sentinel_1e9")


def softmax_over_queries(Q, K, V, mask=None):  # softmax over the wrong axis
    return attention(Q, K, V, mask, bug="softmax_over_queries")


def model_width_scale(Q, K, V, mask=None):  # the scale from the model's width, not the head's
    return attention(Q, K, V, mask, bug="model_width_scale")


BUGS = ("inverted_polarity", "sentinel_1e9", "softmax_over_queries", "model_width_scale")

if __name__ == "__main__":
    chosen = sys.argv[1] if len(sys.argv) > 1 else "run_scaled_dot_product_attention"
    if chosen not in BUGS + ("run_scaled_dot_product_attention",):
        sys.exit(f"cs336_adapter.py: no planted bug {chosen!r}; the bugs are {', '.join(BUGS)}")
    attncheck.serve(attncheck.masked(globals()[chosen], tensors="torch"))
