"""Apple MLX's `mx.fast.scaled_dot_product_attention` on the CPU, as a child of `attncheck check --impl-cmd`.

    attncheck check --jobs 1 --impl-cmd "VENV_PYTHON -m attncheck.adapters.mlx [--f64]"

VENV_PYTHON: the venv ci/lib.sh's ensure_venvs makes from ci/requirements-mlx.txt (mlx 0.32.4 and
mlx-cpu 0.32.4, PyPI's `mlx[cpu]` for Linux x86_64; ATTNCHECK_MLX_PYTHON). The installed mlx's own
function, `mlx.core.fast.scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None)`,
on mx.cpu: each problem becomes mx.array inputs and one call; the output is returned as MLX gives
it, with no masking, scaling, NaN handling or re-computation of the adapter's own. On the CPU the
function always takes its "fallback", the composite in mlx/fast.cpp (ScaledDotProductAttention::
use_fallback is true for a CPU stream): q times the scale (an array of q's dtype), scores = q K^T,
a bool mask applied by where(mask, scores, finfo(dtype).min), an additive one added,
softmax(precise=True) (in float32 for f16 and bf16, as its docstring says), then P V. MLX's BLAS on
Linux is the reference BLAS in mlx_cpu.libs (single-threaded).

How each feature of a problem reaches MLX:

  q, k, v     mx.array query [B,H,Tq,dk], key [B,H_kv,Tk,dk], value [B,H_kv,Tk,dv] as they are
              (MLX's layout is attncheck's). dv != dk: the docstring names one D for all three, but
              the CPU composite multiplies P by V of any width and the call runs: claimed, no
              equal_head_dims restriction (MLX's GPU kernels may refuse it; not checked here).
  formats     mx.float32, float16, bfloat16 (a bf16 problem's float32 values holding bf16 values
              made with mx.array(x, dtype=), exact; the bfloat16 output widened to float32, exact).
              Each is claimed only when a 1-element call in it runs. float64 runs too, but only
              with --f64 is it claimed: MLX keeps the softmax in float32 "regardless of the input
              precision" (its docstring), so a float64 problem is not computed in float64 (error
              near 2^-26 relative, not 2^-53: examples/mlx/repro_float64_softmax_in_float32.py).
              (mx.array of a float64 NumPy array without dtype= makes float32, MLX's default: the
              adapter always passes dtype=.)
  scale       scale= is required by MLX (a C++ float: the binding rounds the problem's double to
              float32, and the composite rounds it again to the inputs' dtype when it multiplies q).
              When the problem says default the adapter passes `q.shape[-1] ** -0.5`, the
              1/sqrt(D) MLX's own docstring example and mlx-lm compute; this is the one value the
              adapter makes, and it is what MLX users pass.
  gqa         key and value with H_kv heads as they are: MLX unflattens the query heads into
              (H_kv, H / H_kv), so query head h reads KV head h // (H / H_kv), attncheck's rule.
  causal      lower-right: mask="causal" (MLX's docstring: "lower-right alignment where the last
              query aligns with the last key"; the composite allows key j when j <= i + Tk - Tq,
              attncheck's lower-right, test_mlx.py checks it with Tq < Tk and Tq > Tk, where the
              first Tq - Tk rows see no key; mlx issue 2835, open, asks for PyTorch's upper-left
              and the maintainers kept lower-right; PR 2967 notes the CUDA kernels switch to
              upper-left when Tq > Tk, which the CPU composite does not). Upper-left
              with Tq == Tk is the same mask, passed as "causal". Translated: upper-left with
              Tq != Tk, which MLX does not have, becomes the bool mask (key j <= i). MLX refuses
              "causal" together with an array mask ("No array mask should be passed"), so with any
              other mask either alignment is Translated into that array too.
  allow       mask= a bool array [B,1,Tq,Tk] (True = attend; test_mlx.py checks the polarity),
              broadcast over heads by MLX.
  kv_lens     Translated: MLX has no key lengths, so key j >= kv_lens[b] is False in the bool mask.
  window      Translated: MLX has no window, so key j outside
              i + Tk - Tq - left <= j <= i + Tk - Tq + right (-1 unbounded) is False in the bool mask.
  bias        mask= an additive array [B,H,Tq,Tk] in the problem's format (MLX requires an additive
              mask's type to promote to q's: a float32 one is refused for f16), added to the scaled
              scores (-inf forbids). Translated: when the bool mask above exists too, the one mask is
              additive: the bias where allowed, -inf where not (MLX's own conversion of a bool mask
              for its fused GPU kernels, mlx/fast.cpp, is 0 / -inf too).
  sinks       sinks= the problem's float32 [H] as an mx.array of float32, claimed where a 1-element
              call with them runs.
  not claimed softcap, lse (the function returns
              the output alone), backward (mx.vjp could give it; not wired), dropout.

Nothing is refused: no restriction is declared and no problem raises NotExpressible.

What attncheck finds (mlx 0.32.4, seed 1, 200 cases per format; each shown with MLX and NumPy
alone by examples/mlx/repro_*.py, exit 0 while it reproduces):
  bf16        the scores are rounded to bfloat16 before the float32 softmax: scores 1023 and
              1027.125 weigh 0.5 each (repro_bf16_scores_rounded.py); wrong values no policy accepts.
  f16         the scores are float16, so one past 65504 is inf and its row NaN, a forbidden one
              too through an additive mask (repro_f16_scores_overflow_nan.py); the scale is rounded
              to float16 before it multiplies q (repro_f16_scale_rounded.py).
  f64 (--f64) the softmax in float32 (repro_float64_softmax_in_float32.py).
  any format  a forbidden key whose score overflows to +inf makes an additive mask's row NaN
              (inf + -inf; repro_forbidden_key_score_overflow.py): a bias with -inf, or the
              additive mask the adapter makes of a bias and a bool part, not MLX's bool mask.
  conventions an empty row is the mean under a bool mask, NaN under a -inf bias; NaN in a
              forbidden value reaches the output (repro_empty_row_is_the_mean.py).

MLX's conventions on the CPU, to check it under (test_mlx.py checks each):
  empty rows     a row whose keys a bool mask (allow, key lengths, causal, window) forbids gives the
                 mean of V over all Tk keys (every score replaced by the same finfo(dtype).min;
                 --empty-rows mean); a row that a bias of -inf empties, with or without the bool
                 part (then the additive mask above, -inf), gives NaN.
  masked inputs  a forbidden key's score is replaced (NaN or inf in a forbidden key does not reach
                 the output), but the weights multiply all of V, so NaN or inf in a forbidden value
                 reaches the output through 0 x NaN (--masked-inputs finite).
"""
import argparse
import os
import sys

import numpy as np

from . import library, serve

mx = library("mlx.core", "mlx", entry="fast.scaled_dot_product_attention")

DTYPES = {"f32": mx.float32, "f64": mx.float64, "f16": mx.float16, "bf16": mx.bfloat16}


class Adapter:
    """forward(p): one call of mx.fast.scaled_dot_product_attention on mx.cpu."""

    def __init__(self, f64=False):
        mx.set_default_device(mx.cpu)
        self.f64 = f64
        self.capabilities = self._probe()
        self.restrictions = []

    def _probe(self):
        """The features a 1-element call with each accepts on this mlx."""
        claims = set()
        one = dict(B=1, H=1, H_kv=1, Tq=1, Tk=1, dk=1, dv=1)

        def runs(**features):
            try:
                out = self.call(**{**one, "dtype": "f32", **features})
                mx.eval(out)
                return True
            except (RuntimeError, TypeError, ValueError):
                return False

        for name in DTYPES:
            if (name != "f64" or self.f64) and runs(dtype=name):
                claims.add(name)
        if runs(allowed=np.ones((1, 1, 1), bool)):
            claims |= {"allow", "kv_lens", "window"}
        if runs(causal=True):
            claims.add("causal")
        if runs(bias=np.zeros((1, 1, 1, 1), np.float32)):
            claims.add("bias")
        if runs(H=2):
            claims.add("gqa")
        if runs(sinks=np.zeros(1, np.float32)):
            claims.add("sinks")
        return claims

    def call(self, dtype, B, H, H_kv, Tq, Tk, dk, dv, q=None, k=None, v=None, allowed=None, bias=None,
             causal=False, scale=None, sinks=None):
        """The output (an mx.array of the problem's dtype) for inputs given as NumPy (zeros when None).
        allowed: None or bool [B,Tq,Tk]; bias: None or [B,H,Tq,Tk]; causal: mask="causal"; scale:
        None for the default, q.shape[-1] ** -0.5; sinks: None or float32 [H]."""
        t = DTYPES[dtype]
        array = lambda x, shape: (mx.zeros(shape, dtype=t) if x is None else mx.array(np.asarray(x), dtype=t))
        q, k, v = array(q, (B, H, Tq, dk)), array(k, (B, H_kv, Tk, dk)), array(v, (B, H_kv, Tk, dv))
        mask = None
        if bias is not None:
            mask = array(bias, (B, H, Tq, Tk))
            if allowed is not None:
                mask = mx.where(mx.array(allowed)[:, None], mask, mx.array(-np.inf, dtype=t))
        elif allowed is not None:
            mask = mx.array(allowed)[:, None]  # [B,1,Tq,Tk], broadcast over heads
        elif causal:
            mask = "causal"
        if scale is None:
            scale = q.shape[-1] ** -0.5  # MLX's docstring's D ** -0.5
        sinks = None if sinks is None else mx.array(np.asarray(sinks, np.float32))
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, sinks=sinks)

    def translate(self, p):
        """The call's arguments for problem p (the keywords of `call`)."""
        if p.dtype not in self.capabilities:
            raise ValueError(f"format {p.dtype} is not claimed")
        if p.softcap is not None or p.backward or p.want_lse or p.dropout_p:
            raise ValueError("a soft-cap, lse, dropout or backward is not claimed")
        i = np.arange(p.Tq)[:, None]
        j = np.arange(p.Tk)[None, :]
        diagonal = i + p.Tk - p.Tq
        parts = []
        if p.allow is not None:
            parts.append(p.allow)
        if p.kv_lens is not None:
            parts.append(j[None] < p.kv_lens[:, None, None])
        if p.window is not None:
            left, right = p.window
            if left >= 0:
                parts.append(j >= diagonal - left)
            if right >= 0:
                parts.append(j <= diagonal + right)
        causal = p.causal
        if causal == "upper-left" and p.Tq == p.Tk:
            causal = "lower-right"  # the same mask
        native_causal = False
        if causal == "lower-right" and not parts and p.bias is None:
            native_causal = True
        elif causal != "none":  # Translated into the array mask
            parts.append(j <= (i if causal == "upper-left" else diagonal))
        allowed = None
        if parts:
            allowed = np.ones((p.B, p.Tq, p.Tk), bool)
            for part in parts:
                allowed &= part
        return dict(dtype=p.dtype, B=p.B, H=p.H, H_kv=p.H_kv, Tq=p.Tq, Tk=p.Tk, dk=p.dk, dv=p.dv, q=p.q, k=p.k,
                    v=p.v, allowed=allowed, bias=p.bias, causal=native_causal, scale=p.scale,
                    sinks=getattr(p, "sinks", None))

    def __call__(self, p):
        out = self.call(**self.translate(p))
        if out.dtype != DTYPES[p.dtype]:
            raise TypeError(f"mlx returned {out.dtype} for a {p.dtype} problem")
        if p.dtype == "bf16":
            out = out.astype(mx.float32)  # bf16 values, exactly, in float32
        return np.array(out)


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (forward, capabilities, restrictions), or
    None when an option printed what was asked (--show-capabilities)."""
    parser = argparse.ArgumentParser(prog="python3 -m attncheck.adapters.mlx", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--f64", action="store_true",
                        help="claim f64 too (MLX keeps the softmax in float32 for float64 inputs)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    args = parser.parse_args(argv)
    adapter = Adapter(args.f64)
    if args.show_capabilities:
        print(f"mlx {mx.__version__} on {mx.default_device()}: {' '.join(sorted(adapter.capabilities))}")
        return None
    return dict(forward=adapter, capabilities=adapter.capabilities, restrictions=adapter.restrictions)


def main(argv=None):
    serve("mlx", setup(argv))


if __name__ == "__main__":
    main()
