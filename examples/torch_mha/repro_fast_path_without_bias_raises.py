"""torch 1.13's nn.MultiheadAttention(bias=False) raises on its fast path (pytorch issue 97128,
"MultiHeadAttention, fast path broken with bias=False or uneven number of heads", still open):
in eval mode under torch.no_grad(), with batch_first=True and self-attention, the module hands its
in_proj_bias, None, to torch._native_multi_head_attention, which takes no None ("argument
'qkv_bias' (position 7) must be Tensor, not NoneType"). The same module in training mode (the
slow path) computes the layer, and agrees with a float64 NumPy computation of it.

The issue's second case, an odd num_heads with a key_padding_mask, does not reproduce on 1.13:
its MultiheadAttention.forward already falls back to the slow path when num_heads is odd
("num_heads is odd"), and the result agrees (printed, not part of the exit status).

attncheck's finding: `--impl-cmd "python3 -m attncheck.adapters.torch_mha --path fast"` raises
TypeError on every bias-free layer call (D2L's bias-free maps), which no capability rules out.

Shown with torch 1.13.0a0 (Debian 12's python3-torch 1.13.1), numpy 1.24.2, CPU.
Run: /usr/bin/python3 examples/torch_mha/repro_fast_path_without_bias_raises.py
Exit 0 while it reproduces (the fast path raises), 1 when it computes the layer, 2 without torch.
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


def numpy_layer(x, in_w, out_w, H, kpm=None, in_b=None, out_b=None):
    """The layer in float64: x [B,T,D], in_w [3D,D] (torch's x W^T), out_w [D,D]; kpm True = padding."""
    B, T, D = x.shape
    qkv = x @ in_w.T + (0 if in_b is None else in_b)
    q, k, v = (a.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=-1))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H)
    if kpm is not None:
        s = np.where(kpm[:, None, None, :], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    heads = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    return heads @ out_w.T + (0 if out_b is None else out_b)


def run(module, x, kpm, fast):
    """(out, error) from the module on the fast (eval, no_grad) or slow (train) path."""
    try:
        if fast:
            module.eval()
            with torch.no_grad():
                return module(x, x, x, key_padding_mask=kpm)[0].double().numpy(), None
        module.train()
        return module(x, x, x, key_padding_mask=kpm)[0].detach().double().numpy(), None
    except Exception as error:
        return None, f"{type(error).__name__}: {str(error).splitlines()[0]}"


torch.manual_seed(0)
B, T, D = 2, 3, 4
x = torch.randn(B, T, D, dtype=torch.float64)
mha = torch.nn.MultiheadAttention(D, 2, bias=False, batch_first=True, dtype=torch.float64)
want = numpy_layer(x.numpy(), mha.in_proj_weight.detach().numpy(), mha.out_proj.weight.detach().numpy(), 2)
slow, slow_error = run(mha, x, None, fast=False)
fast, fast_error = run(mha, x, None, fast=True)
print(f"bias=False, 2 heads, slow path: max |error| vs float64 NumPy {np.abs(slow - want).max():.2g}")
print(f"bias=False, 2 heads, fast path: {fast_error or f'max |error| {np.abs(fast - want).max():.2g}'}")

mha = torch.nn.MultiheadAttention(D, 1, batch_first=True, dtype=torch.float64)
kpm = torch.tensor([[False, False, True], [False, True, True]])
want = numpy_layer(x.numpy(), mha.in_proj_weight.detach().numpy(), mha.out_proj.weight.detach().numpy(), 1,
                   kpm.numpy(), mha.in_proj_bias.detach().numpy(), mha.out_proj.bias.detach().numpy())
fast, odd_error = run(mha, x, kpm, fast=True)
print(f"1 head (odd) with a key_padding_mask, fast path: "
      f"{odd_error or f'falls back to the slow path; max |error| {np.abs(fast - want).max():.2g}'}")

if fast_error is not None and "qkv_bias" in fast_error:
    print("reproduced: the fast path raises for bias=False")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
