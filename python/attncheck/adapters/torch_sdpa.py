"""PyTorch's scaled dot-product attention on the CPU, as a child of `attncheck check --impl-cmd`.

The installed torch's own function: `torch.nn.functional.scaled_dot_product_attention` (2.0 and
later), or on torch 1.13 (Debian 12's python3-torch) its predecessor
`torch.nn.functional._scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
need_attn_weights, is_causal)`, which returns (out, weights). With --lse, the CPU flash kernel's
private operator `torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value,
dropout_p, is_causal, *, attn_mask, scale) -> (output, logsumexp)`, where the installed torch has
it (not 1.13). Each problem becomes tensors and one call; the output (and logsumexp) is returned as
the library gives it: no masking, scaling, NaN handling or re-computation of its own. dropout_p is
the problem's (0 without dropout); torch runs on one thread (--threads).

  PYTHONPATH=python build/cli/attncheck check --jobs 1 \\
    --impl-cmd "python3 -m attncheck.adapters.torch_sdpa [--backend math|flash|default] [--lse]"

How each feature of a problem reaches torch:

  q, k, v     query [B,H,Tq,dk], key [B,H_kv,Tk,dk], value [B,H_kv,Tk,dv] as they are.
  formats     torch.float32, float64, bfloat16 (a bf16 problem's values, float32 holding bf16
              values, converted exactly), float16. Claimed only where a tiny call in that format
              runs on this torch and backend: torch 1.13 has no float16 matmul on the CPU ("bmm"
              not implemented for 'Half'), so f16 is not claimed there.
  allow       the bool attn_mask [B,1,Tq,Tk] (True = take part in attention, in 1.13 as in 2.x;
              test_torch_sdpa.py checks the polarity on both), broadcast over heads.
  kv_lens     Translated: SDPA has no key lengths, so key j >= kv_lens[b] is False in the bool
              attn_mask.
  bias        a float attn_mask [B,H,Tq,Tk] in the query's dtype, added to the scores (-inf
              forbids). Translated: with an allow mask, key lengths or a causal mask that goes
              into the mask (below), the one attn_mask is float: the bias where allowed, -inf
              where not. (1.13's docstring says only a bool mask is supported; its composite adds
              a float one, as 2.x documents.)
  causal      upper-left: is_causal=True (torch's alignment, tril with diagonal 0). lower-right:
              is_causal=True when Tq == Tk (the two coincide); with Tq != Tk,
              torch.nn.attention.bias.causal_lower_right(Tq, Tk) as the attn_mask where it
              exists (2.3 and later) and no other mask is given, else Translated: key j <= i + Tk
              - Tq in the bool (or float) attn_mask. torch refuses is_causal with an attn_mask
              ("Explicit attn_mask should not be set when is_causal=True"), so with any other
              mask a causal mask of either kind is Translated into the attn_mask too.
  scale       the `scale` keyword (2.1 and later), the problem's double; absent when the problem
              says default, so torch uses its own 1/sqrt(E). torch 1.13 has no scale argument
              and always scales by 1/sqrt(dk): the adapter does not fold a scale into q (that
              would be its own arithmetic), so on 1.13 a problem with an explicit scale raises
              NotExpressible, which attncheck reports as raised (the client has no way to decline
              a problem that the capabilities cannot rule out: every problem may carry a scale),
              unless that scale is 1/sqrt(dk) itself (the double nearest it), which torch's
              default is: then nothing is passed.
  gqa         enable_gqa=True when H != H_kv (2.5 and later; torch repeats the KV heads with
              repeat_interleave, so query head h reads KV head h // (H / H_kv), attncheck's rule).
              Not claimed on older torch. With --lse, the private operator takes H != H_kv as it
              is (no enable_gqa keyword; it groups the same way, h // (H / H_kv)).
  lse         --lse only: the private CPU flash operator's logsumexp [B,H,Tq] (float32, float64
              for float64), with its output. Not claimed without --lse: the public function
              returns no log-sum-exp. With --lse every problem runs through that operator, which
              takes a float attn_mask only ("Attention mask is the same data type as query"):
              Translated: the bool attn_mask becomes 0 where allowed and -inf where not, as the
              public function's dispatcher converts a bool mask before it calls the operator, and
              lower-right causal with Tq != Tk always goes into the mask.
  backend     --backend math|flash: torch.nn.attention.sdpa_kernel(SDPBackend.MATH or
              FLASH_ATTENTION) (2.3 and later) or torch.backends.cuda.sdp_kernel(enable_math=,
              enable_flash=, enable_mem_efficient=False) (2.0 to 2.2) around each call; default:
              torch's own choice. torch 1.13 has one CPU path (its math composite): default and
              math both name it, flash is refused. torch 2.15's CPU flash kernel (--backend flash,
              and --lse) refuses dv != dk ("No available kernel"; the operator: "Q/K/V should have
              the same head size"): no capability rules such problems out, so each is a raised
              finding (examples/torch_sdpa/repro_flash_needs_equal_head_sizes.py). With
              is_causal=True and a scale of 0 or below, the same kernel gives NaN in every row that
              masks a key, under --backend flash, --lse and the default backend alike, which takes
              it on the CPU (examples/torch_sdpa/repro_flash_causal_scale_not_positive_nan.py).
  dropout     torch 1.13 only: dropout_p as it is, after torch.manual_seed(the problem's seed)
              (1.13's function takes no generator; its dropout draws from torch's default one, so
              one seed gives one mask), need_attn_weights=True when the keep mask is asked. 1.13
              returns the weights after its dropout (each kept weight times 1/(1-p) rounded to
              the tensor's format, each dropped one 0: test_torch_sdpa.py checks it), and the
              keep mask is read off them: kept where the weight is not 0. That reading is exact
              wherever the weight before dropout is finite and not 0 (a kept weight only grows);
              where it is 0 (a forbidden key, an exp that underflowed) or NaN, torch's bit cannot
              be seen, and neither can it change out (0, or NaN, either way): such a weight reads
              as dropped (0) or kept (NaN). Not claimed on 2.x: its public function returns no
              weights, so no keep mask, and the path through
              `torch.ops.aten._scaled_dot_product_attention_math(..., dropout_mask=)` is not wired
              (1.13 has that operator too, without dropout_mask: the public function's own).
  not claimed window, softcap (no such arguments), backward (not wired: torch's autograd could
              give it, but this adapter checks the forward).

A format, mask, bias or grouped KV heads is claimed only when a 1-element call using it runs on
this torch (and backend); --show-capabilities prints the claims. Measured: torch 1.13 claims f32
f64 bf16 allow kv_lens causal bias dropout dropout_mask; torch 2.15 claims f32 f64 bf16 f16 allow
kv_lens causal bias gqa under every --backend, and lse too with --lse (no dropout: above).

torch's conventions, to check it under (test_torch_sdpa.py checks each):
  empty rows     1.13: NaN (--empty-rows nan); 2.5 and later: 0, math and CPU flash alike.
  lse-empty      the CPU flash operator gives an empty row out 0 and logsumexp 0 (--lse-empty zero).
  masked inputs  the mask is added to the scores and the weights multiply all of V, so NaN or inf
                 in a forbidden key or value reaches the output (--masked-inputs finite).
"""
import argparse
import contextlib
import importlib
import math

import numpy as np

from . import NotExpressible, library, refuse, serve, version

# 1.13: the private F._scaled_dot_product_attention (pytorch PR 81956); 2.0 the public one
torch = library("torch", "torch_sdpa", since="1.13")
F = torch.nn.functional

VERSION = version(torch.__version__)[:2]
LEGACY = not hasattr(F, "scaled_dot_product_attention")  # torch 1.13: F._scaled_dot_product_attention
HAS_SCALE = VERSION >= (2, 1)
HAS_GQA = VERSION >= (2, 5)
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}


def _optional(getter):
    try:
        return getter()
    except (AttributeError, ImportError, RuntimeError):
        return None


LOWER_RIGHT = _optional(lambda: importlib.import_module("torch.nn.attention.bias").causal_lower_right)
FLASH_FOR_CPU = _optional(lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu)
SDPA_KERNEL = _optional(lambda: importlib.import_module("torch.nn.attention"))
if SDPA_KERNEL is not None and not hasattr(SDPA_KERNEL, "sdpa_kernel"):
    SDPA_KERNEL = None


def backend_context(backend):
    """A context manager that makes torch use `backend` ('default', 'math' or 'flash')."""
    if backend == "default" or (LEGACY and backend == "math"):
        return contextlib.nullcontext()
    if LEGACY:
        raise ValueError("torch 1.13 has one CPU path (its math composite): --backend default or math")
    if SDPA_KERNEL is not None:
        chosen = {"math": SDPA_KERNEL.SDPBackend.MATH, "flash": SDPA_KERNEL.SDPBackend.FLASH_ATTENTION}[backend]
        return SDPA_KERNEL.sdpa_kernel(chosen)
    return torch.backends.cuda.sdp_kernel(enable_math=backend == "math", enable_flash=backend == "flash",
                                          enable_mem_efficient=False)


class Adapter:
    """forward(p) for one configuration: backend 'default', 'math' or 'flash'; lse through the
    private CPU flash operator."""

    def __init__(self, backend="default", lse=False):
        if lse and FLASH_FOR_CPU is None:
            raise ValueError(f"--lse needs torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, "
                             f"which torch {torch.__version__} does not have")
        if lse and backend != "default":
            raise ValueError("--lse calls the CPU flash operator itself: it takes no --backend")
        backend_context(backend)  # refuses a backend this torch does not have
        self.backend, self.lse = backend, lse
        self.capabilities = self._probe()
        # torch 1.13's entry point has no scale argument (scale= came in 2.1): the default scale only.
        self.restrictions = [] if HAS_SCALE else ["default_scale"]

    def _probe(self):
        """The features a 1-element call with each accepts on this torch and backend."""
        claims = set()
        one = dict(B=1, H=1, H_kv=1, Tq=1, Tk=1, dk=1, dv=1)

        def runs(**features):
            try:
                self.call(**{**one, "dtype": "f32", **features})
                return True
            except (RuntimeError, TypeError, ValueError, NotImplementedError):
                return False

        for name in DTYPES:
            if runs(dtype=name):
                claims.add(name)
        if runs(allowed=np.ones((1, 1, 1), bool)):
            claims |= {"allow", "kv_lens"}
        if runs(is_causal=True):
            claims.add("causal")
        if runs(bias=np.zeros((1, 1, 1, 1), np.float32)):
            claims.add("bias")
        if (HAS_GQA or self.lse) and runs(H=2):
            claims.add("gqa")
        if self.lse:
            claims.add("lse")
        if LEGACY and runs(dropout_p=0.5, want_keep=True):  # 1.13 alone returns the weights after dropout
            claims |= {"dropout", "dropout_mask"}
        return claims

    def call(self, dtype, B, H, H_kv, Tq, Tk, dk, dv, q=None, k=None, v=None, allowed=None, bias=None,
             is_causal=False, lower_right=False, scale=None, dropout_p=0.0, seed=0, want_keep=False):
        """(out, logsumexp or None, keep or None) from torch, for tensors given as NumPy (zeros when
        None): logsumexp with --lse, keep (bool, True = kept) with want_keep. allowed: None or bool
        [B,Tq,Tk]; bias: None or [B,H,Tq,Tk]; lower_right: the CausalBias; seed: torch.manual_seed's
        before a call with dropout."""
        t = DTYPES[dtype]
        tensor = lambda x, shape: (torch.zeros(shape, dtype=t) if x is None
                                   else torch.from_numpy(np.array(x)).to(t))
        q, k, v = tensor(q, (B, H, Tq, dk)), tensor(k, (B, H_kv, Tk, dk)), tensor(v, (B, H_kv, Tk, dv))
        mask = None
        if bias is not None:
            bias = tensor(bias, (B, H, Tq, Tk))
            mask = bias if allowed is None else bias.masked_fill(~torch.from_numpy(allowed)[:, None], -math.inf)
        elif allowed is not None:
            mask = torch.from_numpy(np.array(allowed))[:, None]  # [B,1,Tq,Tk], broadcast over heads
        elif lower_right:
            mask = LOWER_RIGHT(Tq, Tk)
        kwargs = {}
        if not HAS_SCALE and scale == 1 / math.sqrt(dk):
            scale = None  # the scale torch 1.13 always applies
        if scale is not None:
            if not HAS_SCALE:
                raise NotExpressible(f"torch {torch.__version__}'s _scaled_dot_product_attention has no scale argument "
                                 f"(it always scales by 1/sqrt(dk); scale= came in 2.1): the explicit scale {scale!r} "
                                 f"cannot be passed")
            kwargs["scale"] = scale
        if dropout_p:
            torch.manual_seed(seed)  # the stream torch's dropout draws from: one seed, one mask
        if self.lse:
            if mask is not None and mask.dtype == torch.bool:  # the operator takes a mask of the query's dtype
                mask = torch.zeros(mask.shape, dtype=t).masked_fill(~mask, -math.inf)
            out, lse = FLASH_FOR_CPU(q, k, v, dropout_p, is_causal, attn_mask=mask, **kwargs)
            return out, lse, None
        if H != H_kv:
            if not HAS_GQA:
                raise NotExpressible(f"torch {torch.__version__} has no enable_gqa (2.5 and later)")
            kwargs["enable_gqa"] = True
        with backend_context(self.backend):
            if LEGACY:
                out, weights = F._scaled_dot_product_attention(q, k, v, mask, dropout_p, want_keep, is_causal)
                # the weights after dropout: not 0 where kept (the module's docstring, "dropout", says
                # where that reading is exact and why it is faithful where it is not)
                return out, None, (weights != 0 if want_keep else None)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal,
                                                  **kwargs), None, None

    def translate(self, p):
        """The call's arguments for problem p (the keywords of `call`)."""
        if p.dtype not in self.capabilities:
            raise ValueError(f"format {p.dtype} is not claimed")
        if p.window is not None or p.softcap is not None or p.backward:
            raise ValueError("a window, soft-cap or backward is not claimed")
        if p.want_lse and not self.lse:
            raise ValueError("lse is claimed only with --lse")
        if p.dropout_p and "dropout" not in self.capabilities:
            raise ValueError(f"dropout is claimed on torch 1.13 alone, not on {torch.__version__}")
        i = np.arange(p.Tq)[:, None]
        j = np.arange(p.Tk)[None, :]
        allowed = None
        if p.allow is not None:
            allowed = p.allow.copy()
        if p.kv_lens is not None:
            within = np.broadcast_to(j[None] < p.kv_lens[:, None, None], (p.B, p.Tq, p.Tk))
            allowed = within.copy() if allowed is None else allowed & within
        causal = p.causal
        if causal == "lower-right" and p.Tq == p.Tk:
            causal = "upper-left"  # the same mask
        other_mask = allowed is not None or p.bias is not None
        is_causal = lower_right = False
        if causal == "upper-left" and not other_mask:
            is_causal = True
        elif causal == "lower-right" and not other_mask and LOWER_RIGHT is not None and not self.lse:
            lower_right = True
        elif causal != "none":  # Translated into the attn_mask
            diagonal = 0 if causal == "upper-left" else p.Tk - p.Tq
            below = np.broadcast_to(j <= i + diagonal, (p.B, p.Tq, p.Tk))
            allowed = below.copy() if allowed is None else allowed & below
        return dict(dtype=p.dtype, B=p.B, H=p.H, H_kv=p.H_kv, Tq=p.Tq, Tk=p.Tk, dk=p.dk, dv=p.dv, q=p.q, k=p.k,
                    v=p.v, allowed=allowed, bias=p.bias, is_causal=is_causal, lower_right=lower_right, scale=p.scale,
                    dropout_p=p.dropout_p, seed=p.dropout_seed, want_keep=p.want_keep)

    def __call__(self, p):
        out, lse, keep = self.call(**self.translate(p))
        if out.dtype != DTYPES[p.dtype]:
            raise TypeError(f"torch returned {out.dtype} for a {p.dtype} problem")
        out = (out.to(torch.float32) if p.dtype == "bf16" else out).numpy()  # bf16 values, exactly, in float32
        # lse: float32 (float64 for f64), as the operator gives it
        results = [out] + [x.numpy() for x, wanted in ((lse, p.want_lse), (keep, p.want_keep)) if wanted]
        return results[0] if len(results) == 1 else tuple(results)


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (forward, capabilities), or None when an
    option printed what was asked (--show-capabilities)."""
    parser = argparse.ArgumentParser(prog="python3 -m attncheck.adapters.torch_sdpa", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("default", "math", "flash"), default="default",
                        help="the SDPA backend to force (default: torch's own choice)")
    parser.add_argument("--lse", action="store_true",
                        help="run every problem through aten._scaled_dot_product_flash_attention_for_cpu and claim lse")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        adapter = Adapter(args.backend, args.lse)
    except ValueError as error:
        refuse("torch_sdpa", str(error))
    if args.show_capabilities:
        print(f"torch {torch.__version__}, backend {args.backend}{', lse' if args.lse else ''}: "
              f"{' '.join(sorted(adapter.capabilities))}")
        return None
    return dict(forward=adapter, capabilities=adapter.capabilities, restrictions=adapter.restrictions)


def main(argv=None):
    serve("torch_sdpa", setup(argv))


if __name__ == "__main__":
    main()
