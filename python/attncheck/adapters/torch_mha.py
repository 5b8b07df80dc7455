"""PyTorch's `torch.nn.MultiheadAttention` on the CPU, as a layer (capability mha) for
`attncheck check --impl-cmd`.

For each layer call it makes `nn.MultiheadAttention(embed_dim=D, num_heads=H, bias=..., batch_first=True)`
in the problem's format, loads the problem's weights into the module's own parameters and calls
the module once: no masking, scaling, NaN handling or re-computation of its own. Written for
Debian 12's python3-torch 1.13 (/usr/bin/python3), and run on PyPI's 2.15 too (ci/lib.sh's torch
venv; below, where it differs); torch runs on one thread (--threads).

  PYTHONPATH=python build/cli/attncheck check --jobs 1 \\
    --impl-cmd "python3 -m attncheck.adapters.torch_mha --path slow|fast"

The two paths (--path):

  slow  module.train() with dropout 0 (so nothing is dropped) and autograd on (the parameters
        require grad): F.multi_head_attention_forward, torch's Python composite (in-projection,
        bmm, softmax, bmm, out-projection).
  fast  module.eval() under torch.no_grad(): torch._native_multi_head_attention, the fused
        kernel ("BetterTransformer"), where the module takes it. torch 1.13's
        MultiheadAttention.forward (torch/nn/modules/activation.py) falls back to the slow path,
        silently, unless all of these hold: the input is batched (3-D); query is key is value (the
        same tensor: self-attention); the dtypes of query, in_proj_bias and in_proj_weight agree;
        not training; batch_first; no bias_k/bias_v (add_bias_kv); dropout == 0 (even in eval);
        no add_zero_attn; kdim == vdim == embed_dim; attn_mask is None; no NestedTensor with a
        key_padding_mask; num_heads even; autocast off; no __torch_function__ argument; CPU or
        CUDA tensors; and not (grad enabled and some argument requires grad). need_weights and
        key_padding_mask are not among them: the fused kernel returns the weights and takes a
        key padding mask (mask_type 1). bias=False is not among them either, but the fused
        kernel then raises (pytorch issue 97128: "argument 'qkv_bias' must be Tensor, not
        NoneType"); the adapter passes such a problem on and the error is the finding
        (examples/torch_mha/repro_fast_path_without_bias_raises.py). torch 2.15's forward checks
        much the same, but calls the fused kernel only with in_proj_bias, and else falls back to
        the slow path, silently: where a bias-free module's fast path does not reach the kernel
        (a 1-element call, fused_kernel_takes_no_biases), a problem without biases raises
        NotExpressible before the call. Its fused kernel also takes a bool attn_mask (merged
        with the key padding mask).
        So --path fast claims only what the fused kernel is given here: each feature is claimed
        when a 1-element call with it reaches torch._native_multi_head_attention (the adapter
        counts the calls of that function; its wrapper only counts). On torch 1.13 that leaves
        kv_lens and the weights, but not allow, causal or window (each needs an attn_mask). A
        problem that would fall back anyway raises NotExpressible before the call: cross-attention
        (attncheck sends it whatever the capabilities), an odd H (H 1 too). And a call that did
        not reach the fused kernel raises RuntimeError after it: its result is not the fast path's.

How each part of a layer call reaches torch:

  weights     in_proj_weight [3D, D] = concat(w_q, w_k, w_v)^T (torch's linear is x W^T),
              in_proj_bias [3D] = concat(b_q, b_k, b_v), out_proj.weight = w_o^T, out_proj.bias =
              b_o, copied into the module's parameters in the problem's format. kdim and vdim, the
              widths of key and value's inputs, are never other than D (x_kv [B,Tk,D]), so the
              packed in_proj_weight is always the one (not q_proj_weight/k_proj_weight/v_proj_weight).
  head sizes  torch's head_dim is D / H for Q, K and V alike: a problem with dk or dv other than
              D / H raises NotExpressible. No grouped KV heads (one num_heads): H_kv != H raises
              NotExpressible; gqa is not claimed.
  biases      bias=True gives in_proj_bias and out_proj.bias, bias=False neither: the problem's
              biases are all four or none; another mix raises NotExpressible. (add_bias_kv is
              something else: learned key and value rows appended to the sequence.)
  x           query [B,Tq,D] = x_q, key = value = x_kv (the same tensor); for self-attention query,
              key and value are one tensor, as the fast path needs.
  allow, causal, window
              Translated: one bool attn_mask, True = NOT allowed (torch's polarity, the opposite of
              attncheck's): key j blocked where the allow mask, causal (upper-left j <= i or
              lower-right j <= i + Tk - Tq) or the window forbids it. [Tq, Tk] when it does not
              depend on the batch, else [B*H, Tq, Tk] (row b*H + h, torch's order). torch 1.13's
              forward has no is_causal.
  kv_lens     key_padding_mask bool [B, Tk], True = padding (blocked): key j >= kv_lens[b].
  scale       torch always scales by 1/sqrt(head_dim): a problem with another explicit scale
              raises NotExpressible (that of 1/sqrt(dk) itself, the double nearest it, is torch's
              default and passes).
  weights     need_weights=True, average_attn_weights=False: [B,H,Tq,Tk] per head, returned in
              the module's format (float32 for bf16, exactly; float64 for f64). Claimed as
              mha_weights on both paths. Without the weights asked, need_weights=False.
  formats     f32, f64, bf16, f16 where a 1-element call in that format runs; torch 1.13 has no
              float16 addmm on the CPU ("addmm_impl_cpu_" not implemented for 'Half'), so no f16
              there.

Measured (--show-capabilities) on torch 1.13: slow claims f32 f64 bf16 allow causal kv_lens window
mha mha_weights; fast claims f32 f64 bf16 kv_lens mha mha_weights. On torch 2.15 both claim f32 f64
bf16 f16 allow causal kv_lens window mha mha_weights; its fast path cannot be given an odd H or a
layer without biases, so many calls are not taken (seed 1, 300 cases: 194 of 394 in f32, 223 of
300 in f64, a run attncheck calls inconclusive).

torch's conventions, to check it under: a row with no permitted key gives NaN on both paths (the
softmax of -inf), and the out-projection spreads it over the whole row of out (pytorch issue
160064; --empty-rows nan; examples/torch_mha/repro_empty_row_nan_everywhere.py).
"""
import argparse
import math
import sys

import numpy as np

from . import NotExpressible, library, serve

# 1.13: the oldest checked (Debian 12's), with the fast path's torch._native_multi_head_attention
torch = library("torch", "torch_mha", since="1.13")
nn = torch.nn

DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
PATHS = ("slow", "fast")


class _FastPathCounter:
    """Counts the calls of torch._native_multi_head_attention, the fast path's kernel, by wrapping it
    (the module looks it up on torch at each call); the wrapper passes everything through."""

    def __init__(self):
        native = torch._native_multi_head_attention
        self.calls = 0

        def counted(*args, **kwargs):
            self.calls += 1
            return native(*args, **kwargs)

        torch._native_multi_head_attention = counted


_COUNTER = None


def fast_path_counter():
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _FastPathCounter()
    return _COUNTER


def fused_kernel_takes_no_biases():
    """Whether the fast path of a module without biases (bias=False) reaches
    torch._native_multi_head_attention on this torch: on 1.13 it does, and raises there (pytorch
    issue 97128); on 2.15 the module falls back to the slow path, silently, when in_proj_bias is
    None."""
    counter = fast_path_counter()
    module = nn.MultiheadAttention(embed_dim=2, num_heads=2, bias=False, batch_first=True).eval()
    x = torch.zeros(1, 1, 2)
    before = counter.calls
    try:
        with torch.no_grad():
            module(x, x, x)
    except (RuntimeError, TypeError):
        pass
    return counter.calls == before + 1


def blocked_mask(m):
    """torch's bool attn_mask for the Layer m (True = not allowed), or None: the allow mask, causal
    and the window; [Tq,Tk] when no allow mask makes it depend on the batch, else [B*H,Tq,Tk]."""
    if m.allow is None and m.causal == "none" and m.window is None:
        return None
    i = np.arange(m.Tq)[:, None]
    j = np.arange(m.Tk)[None, :]
    diagonal = i + m.Tk - m.Tq
    permitted = np.ones((m.Tq, m.Tk), bool)
    if m.causal == "upper-left":
        permitted &= j <= i
    elif m.causal == "lower-right":
        permitted &= j <= diagonal
    if m.window is not None:
        left, right = m.window
        if left >= 0:
            permitted &= j >= diagonal - left
        if right >= 0:
            permitted &= j <= diagonal + right
    if m.allow is None:
        return torch.from_numpy(~permitted)
    per_batch = m.allow & permitted                                        # [B,Tq,Tk]
    return torch.from_numpy(np.repeat(~per_batch, m.H, axis=0))            # [B*H,Tq,Tk], row b*H + h


class Adapter:
    """layer(m) for one path, 'slow' or 'fast'."""

    def __init__(self, path="slow"):
        if path not in PATHS:
            raise ValueError(f"--path is slow or fast, not {path!r}")
        self.path = path
        self.counter = fast_path_counter() if path == "fast" else None
        self.fused_without_biases = path == "fast" and fused_kernel_takes_no_biases()
        self.capabilities = self._probe()
        # What nn.MultiheadAttention takes of its claims: heads D / H wide, biases all or none, the
        # default scale; the fast path self-attention alone.
        self.restrictions = ["layer_head_width", "default_scale"] + (["self_attention"] if path == "fast" else [])

    def _probe(self):
        """The formats and features a 1-element layer call with each runs with on this torch (and,
        for --path fast, on the fused kernel)."""
        from .._layer import Layer
        from .._protocol import layer_payload, to_bf16_bits, STORAGE

        def runs(dtype="f32", allow=None, kv_lens=None, causal="none", window=None, want_weights=False, H=2):
            enc = (lambda x: to_bf16_bits(np.asarray(x, np.float32)).tobytes()) if dtype == "bf16" else \
                (lambda x: np.asarray(x, STORAGE[dtype]).tobytes())
            D = H
            one = lambda *shape: enc(np.full(shape, 0.5))
            payload = layer_payload(dtype, (1, H, H, 1, 1, 1, 1), D, causal, window, x_q=one(1, 1, D),
                                    w_q=one(D, D), w_k=one(D, D), w_v=one(D, D), w_o=one(D, D), b_q=one(D),
                                    b_k=one(D), b_v=one(D), b_o=one(D),
                                    allow=None if allow is None else np.ones(1, np.uint8).tobytes(),
                                    kv_lens=None if kv_lens is None else np.ones(1, "<i4").tobytes(),
                                    want_weights=want_weights)
            try:
                result = self(Layer(payload))
                out = result[0] if want_weights else result
                return out.shape == (1, 1, D) and (not want_weights or result[1].shape == (1, H, 1, 1))
            except (RuntimeError, TypeError, ValueError, NotImplementedError):
                return False

        claims = {"mha"}
        for name in DTYPES:
            if runs(dtype=name):
                claims.add(name)
        if runs(allow=True):
            claims.add("allow")
        if runs(kv_lens=True):
            claims.add("kv_lens")
        if runs(causal="upper-left") and runs(causal="lower-right"):
            claims.add("causal")
        if runs(window=(0, 0)):
            claims.add("window")
        if runs(want_weights=True):
            claims.add("mha_weights")
        return claims

    def module(self, m):
        """The nn.MultiheadAttention of the Layer m, its parameters the problem's weights."""
        if m.H_kv != m.H:
            raise NotExpressible(f"H_kv != H: nn.MultiheadAttention has one num_heads for queries, keys and values "
                                 f"(no grouped KV heads; H_kv {m.H_kv}, H {m.H})")
        if m.D % m.H or m.dk != m.D // m.H or m.dv != m.D // m.H:
            raise NotExpressible(f"dk {m.dk}, dv {m.dv} with D {m.D}, H {m.H}: nn.MultiheadAttention's heads "
                                 f"are D / H wide for Q, K and V alike")
        biases = [b is not None for b in (m.b_q, m.b_k, m.b_v, m.b_o)]
        if any(biases) and not all(biases):
            given = ", ".join(n for n, b in zip(("b_q", "b_k", "b_v", "b_o"), biases) if b)
            raise NotExpressible(f"biases {given} alone: nn.MultiheadAttention's bias=True has all four "
                                 f"(in_proj_bias, out_proj.bias), bias=False none")
        t = DTYPES[m.dtype]
        module = nn.MultiheadAttention(embed_dim=m.D, num_heads=m.H, dropout=0.0, bias=all(biases),
                                       batch_first=True, dtype=t)
        tensor = lambda x: torch.from_numpy(np.array(x)).to(t)
        with torch.no_grad():
            module.in_proj_weight.copy_(torch.cat([tensor(m.w_q).T, tensor(m.w_k).T, tensor(m.w_v).T], 0))
            module.out_proj.weight.copy_(tensor(m.w_o).T)
            if all(biases):
                module.in_proj_bias.copy_(torch.cat([tensor(m.b_q), tensor(m.b_k), tensor(m.b_v)]))
                module.out_proj.bias.copy_(tensor(m.b_o))
        return module

    def call(self, m):
        """(out, weights or None) as torch returns them for the Layer m."""
        if m.dtype not in DTYPES:
            raise ValueError(f"format {m.dtype} is not claimed")
        if m.scale is not None and m.scale != 1 / math.sqrt(m.dk):
            raise NotExpressible(f"nn.MultiheadAttention always scales by 1/sqrt(head_dim): the explicit scale "
                                 f"{m.scale!r} cannot be passed")
        if self.path == "fast":
            if not m.self_attention:
                raise NotExpressible("cross-attention: torch's fast path takes self-attention alone (query is key "
                                     "is value), and falls back to the slow path otherwise")
            if m.H % 2:
                raise NotExpressible(f"an odd H: torch {torch.__version__}'s fast path falls back to the slow path with "
                                     f"an odd num_heads (H {m.H})")
            if all(b is None for b in (m.b_q, m.b_k, m.b_v, m.b_o)) and not self.fused_without_biases:
                raise NotExpressible(f"no biases: torch {torch.__version__}'s fast path falls back to the slow path "
                                     f"without in_proj_bias (bias=False)")
        module = self.module(m)
        t = DTYPES[m.dtype]
        x_q = torch.from_numpy(np.array(m.x_q)).to(t)
        x_kv = x_q if m.self_attention else torch.from_numpy(np.array(m.x_kv)).to(t)
        key_padding_mask = None
        if m.kv_lens is not None:
            key_padding_mask = torch.from_numpy(np.arange(m.Tk)[None, :] >= m.kv_lens[:, None])  # True = padding
        kwargs = dict(key_padding_mask=key_padding_mask, need_weights=m.want_weights, attn_mask=blocked_mask(m),
                      average_attn_weights=False)
        if self.path == "slow":
            module.train()  # dropout is 0: nothing is dropped
            with torch.enable_grad():
                return module(x_q, x_kv, x_kv, **kwargs)
        module.eval()
        before = self.counter.calls
        with torch.no_grad():
            out, weights = module(x_q, x_kv, x_kv, **kwargs)
        if self.counter.calls != before + 1:
            raise RuntimeError("torch did not take its fast path (torch._native_multi_head_attention) for this "
                               "problem: the adapter's claims are wrong")
        return out, weights

    def __call__(self, m):
        out, weights = self.call(m)
        if out.dtype != DTYPES[m.dtype]:
            raise TypeError(f"torch returned {out.dtype} for a {m.dtype} layer")
        wide = lambda x: (x.detach().to(torch.float32) if x.dtype == torch.bfloat16 else x.detach()).numpy()
        if m.want_weights:
            return wide(out), wide(weights)
        return wide(out)


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (layer, capabilities), or None when an
    option printed what was asked (--show-capabilities)."""
    parser = argparse.ArgumentParser(prog="python3 -m attncheck.adapters.torch_mha", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", choices=PATHS, default="slow",
                        help="slow: module.train(), grad on (F.multi_head_attention_forward); fast: module.eval() "
                             "under torch.no_grad() (torch._native_multi_head_attention). Default: slow")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    adapter = Adapter(args.path)
    if args.show_capabilities:
        print(f"torch {torch.__version__}, path {args.path}: {' '.join(sorted(adapter.capabilities))}")
        return None
    return dict(layer=adapter, capabilities=adapter.capabilities, restrictions=adapter.restrictions)


def main(argv=None):
    serve("torch_mha", setup(argv))


if __name__ == "__main__":
    main()
