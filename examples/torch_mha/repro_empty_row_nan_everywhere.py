"""torch 1.13's nn.MultiheadAttention gives NaN in every column of out for a query whose keys
are all masked in one head, or in all (pytorch issue 160064, "MultiheadAttention returns all NaN
when using attn_mask to fully mask some heads, and using need_weights=True", still open): the
masked head's softmax over scores all -inf is NaN, and the out-projection, which mixes every
head's columns into every output column, spreads it over the whole row. attncheck's contract gives
a row with no permitted key head 0, so its out is b_o (and one masked head leaves the other heads'
share); its policy `--empty-rows nan` accepts NaN heads, which is what this is.

On 1.13 need_weights does not matter: both settings run the same composite (the issue's
need_weights=False answer, finite, is torch 2.x's SDPA path with its safe softmax), and the fast
path (eval, no_grad, a key_padding_mask) gives NaN too.

attncheck's finding: `--impl-cmd "python3 -m attncheck.adapters.torch_mha --path slow"` (and
--path fast) on a layer call with a row whose keys are all forbidden: out NaN, expected b_o
(accepted under --empty-rows nan).

Shown with torch 1.13.0a0 (Debian 12's python3-torch 1.13.1), numpy 1.24.2, CPU.
Run: /usr/bin/python3 examples/torch_mha/repro_empty_row_nan_everywhere.py
Exit 0 while it reproduces (NaN across the row), 1 when the row is finite, 2 without torch.
"""
import sys

import numpy as np

try:
    import torch
except ImportError as error:
    print(f"needs torch: {error}")
    sys.exit(2)

torch.set_num_threads(1)
print(f"torch {torch.__version__}, numpy {np.__version__}")


def numpy_layer(x, mha, blocked):
    """The layer in float64 by the contract: x [B,T,D], blocked [B,H,T,T] (True = not allowed); a
    head with no permitted key is 0."""
    B, T, D = x.shape
    H = mha.num_heads
    w, b = mha.in_proj_weight.detach().double().numpy(), mha.in_proj_bias.detach().double().numpy()
    q, k, v = (a.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for a in np.split(x @ w.T + b, 3, axis=-1))
    s = np.where(blocked, -np.inf, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H))
    top = s.max(-1, keepdims=True)
    e = np.where(blocked, 0.0, np.exp(s - np.where(np.isfinite(top), top, 0)))
    total = e.sum(-1, keepdims=True)
    p = np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
    heads = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    return heads @ mha.out_proj.weight.detach().double().numpy().T + mha.out_proj.bias.detach().double().numpy()


torch.manual_seed(0)
B, T, D, H = 1, 5, 3, 3
x = torch.randn(B, T, D)
mha = torch.nn.MultiheadAttention(D, H, batch_first=True)
reproduced = []

# The case: head 2 sees no key at all (a per-head attn_mask [B*H, T, T], True = not allowed).
mask = torch.tensor([False, False, True]).view(-1, 1, 1).expand(-1, T, T)
want = numpy_layer(x.double().numpy(), mha, mask.numpy()[None])
for need in (False, True):
    out, weights = mha(x, x, x, attn_mask=mask, need_weights=need, average_attn_weights=False)
    out = out.detach().numpy()
    print(f"one head fully masked, need_weights={need}: out NaN in {np.isnan(out).mean():.0%} of its entries "
          f"(the contract: finite, the two other heads' share; max |out| {np.abs(want).max():.3g})")
    reproduced.append(np.isnan(out).all() and np.isfinite(want).all())

# attncheck's case: every key of batch 1 is padding (kv_lens 0), on both paths (H 2, even, for the fast one).
mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
x = torch.randn(2, 3, 4)
kpm = torch.tensor([[False, False, True], [True, True, True]])
want = numpy_layer(x.double().numpy(), mha, np.broadcast_to(kpm.numpy()[:, None, None, :], (2, 2, 3, 3)))
for path in ("slow", "fast"):
    if path == "slow":
        mha.train()
        out = mha(x, x, x, key_padding_mask=kpm)[0].detach().numpy()
    else:
        mha.eval()
        with torch.no_grad():
            out = mha(x, x, x, key_padding_mask=kpm)[0].numpy()
    print(f"{path} path, batch 1 all padding: out[1] {out[1, 0].tolist()} (the contract: b_o "
          f"{mha.out_proj.bias.detach().numpy().tolist()}); batch 0 max |error| {np.abs(out[0] - want[0]).max():.2g}")
    reproduced.append(np.isnan(out[1]).all() and np.abs(out[0] - want[0]).max() < 1e-5)

if all(reproduced):
    print("reproduced: a masked head's NaN fills the whole row of out")
    sys.exit(0)
print(f"not reproduced ({sum(reproduced)} of {len(reproduced)})")
sys.exit(1)
