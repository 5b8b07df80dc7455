"""PyTorch's FlexAttention on the CPU, as a child of `attncheck check --impl-cmd`.

The installed torch's own function, `torch.nn.attention.flex_attention.flex_attention(query, key,
value, score_mod=None, block_mask=None, scale=None, enable_gqa=False, ..., return_aux=None)` (torch
2.5 and later; an older torch is refused in one line), with the masks written as a `mask_mod`
turned into a BlockMask by the module's own `create_block_mask` and combined by its `and_masks`,
and the soft-cap and bias written as a `score_mod`, the way FlexAttention's docstrings and blog post
write them. Each problem becomes tensors and one call; the output (and log-sum-exp) is returned as
the library gives it: no masking, scaling, NaN handling or re-computation of its own. torch runs on
one thread (--threads).

  PYTHONPATH=python build/cli/attncheck check --jobs 1 \\
    --impl-cmd "$ATTNCHECK_TORCH_PYTHON -m attncheck.adapters.flex_attention"

How it runs on the CPU: called as it is (not under torch.compile), flex_attention warns once
("called without torch.compile() - this will use an unfused implementation that materializes the
full scores matrix") and runs its higher-order operator through dynamo with the "eager" backend,
whose CPU implementation is `torch._higher_order_ops.flex_attention.math_attention`: q and k cast
to float32 (float64 for float64), scores = q k^T times `scale`, score_mod applied to those scaled
scores, torch.where(mask_mod, score, -inf), torch._safe_softmax (a row of -inf alone gives weights
0), the weights cast back to the query's dtype and multiplied by v in that dtype; logsumexp of the
scores after score_mod, -inf for a row with no permitted key. The block structure of the BlockMask
is not used on that path (the mask_mod it carries is). torch.compile (inductor's C++ CPU template)
is not used: each new shape and closure is a compilation of seconds, where the eager path takes
about 0.1 s a call (torch 2.15.0 here).

How each feature of a problem reaches torch:

  q, k, v     query [B,H,Tq,dk], key [B,H_kv,Tk,dk], value [B,H_kv,Tk,dv] as they are (FlexAttention
              takes Ev != E).
  formats     torch.float32, float64, bfloat16 (a bf16 problem's values, float32 holding bf16
              values, converted exactly), float16. Claimed only where a tiny call in that format runs.
  allow       Translated: the mask_mod `allow[b, q_idx, kv_idx]` (True = may attend), the problem's
              mask as a bool tensor captured by the function, as FlexAttention's docs index a
              captured tensor (their document-masking example).
  kv_lens     Translated: the mask_mod `kv_idx < kv_lens[b]` (their padding example).
  causal      Translated: upper-left `q_idx >= kv_idx` (their causal example); lower-right
              `q_idx + (Tk - Tq) >= kv_idx`.
  window      Translated: `kv_idx >= q_idx + (Tk - Tq) - left` and `kv_idx <= q_idx + (Tk - Tq) +
              right` for the sides that are bounded (their sliding-window example, anchored where
              attncheck anchors it, at the lower-right diagonal).
              Every mask_mod of a problem is combined with flex_attention's `and_masks` and passed
              as create_block_mask(mask_mod, B or None, None, Tq, Tk, device="cpu") (B when the
              mask depends on the batch: allow, kv_lens).
  softcap     the score_mod `softcap * tanh(score / softcap)`: the score FlexAttention hands to
              score_mod is already multiplied by `scale` (math_attention above), as attncheck's
              soft-cap wants (softcap * tanh(scale q.k / softcap)). The soft-cap is captured as a
              0-dim float64 tensor (a score of float32 stays float32 with it: a 0-dim tensor does
              not promote, as a Python float would not): captured as a Python float, the way the
              blog post writes it, the second call with another value raises ("RuntimeError when
              making fake tensor call ... can only be of (Tensor, int, SymInt) but got
              (SymFloat,)"): dynamo makes the float dynamic on recompiling and the higher-order
              operator refuses it (examples/flex_attention/repro_softcap_float_second_value_raises.py).
  bias        the score_mod `score + bias[b, h, q_idx, kv_idx]`, after the soft-cap (attncheck's
              order), the bias a tensor in the query's dtype (-inf forbids).
  scale       the `scale` keyword, the problem's double; absent when the problem says default, so
              FlexAttention uses its own 1/sqrt(E).
  gqa         enable_gqa=True when H != H_kv (math_attention repeats KV heads with
              repeat_interleave: query head h reads KV head h // (H / H_kv), attncheck's rule).
  lse         return_aux=AuxRequest(lse=True) (return_lse=True on a torch without AuxRequest):
              the natural log-sum-exp [B,H,Tq], float32 (float64 for float64), as returned.
  not claimed backward (flex_attention refuses requires_grad on the CPU: "FlexAttention does not
              support backward on CPU"), dropout (no such argument).

A format or feature is claimed only when a 1-element call using it runs on this torch;
--show-capabilities prints the claims. Measured on torch 2.15.0 (PyPI's wheel, CPU): f32 f64 bf16
f16 allow kv_lens causal window softcap bias gqa lse. No restriction is declared: each shape the
checker sends was taken (dk != dv, any Tq, Tk).

FlexAttention's conventions, to check it under (test_flex_attention.py checks each):
  empty rows     0, and lse -inf (attncheck's defaults).
  masked inputs  torch.where replaces a forbidden score by -inf, but the weights (0 there) multiply
                 all of V, so NaN or inf in a forbidden value reaches the output (--masked-inputs
                 finite; examples/flex_attention/repro_forbidden_inputs_leak.py).

What remains under them (200 cases of each format, seed 1, 2026-12-03): f64 passes; in f32, f16
and bf16 the lse of a row with a +inf permitted score is +inf, not NaN (torch.logsumexp; its out is
NaN: repro_lse_inf_score.py); in f32 a key forbidden by a -inf bias whose float32 score overflows
gives NaN, +inf + -inf (repro_bias_forbidden_score_overflow.py).
"""
import argparse
import importlib
import warnings

import numpy as np

from . import library, serve, version

torch = library("torch", "flex_attention", since="2.5")  # FlexAttention came in torch 2.5
flex = importlib.import_module("torch.nn.attention.flex_attention")

VERSION = version(torch.__version__)[:2]
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
AUX = getattr(flex, "AuxRequest", None)  # return_aux=AuxRequest(lse=True); older: return_lse=True


def allow_mod(allow):
    return lambda b, h, q_idx, kv_idx: allow[b, q_idx, kv_idx]


def kv_lens_mod(kv_lens):
    return lambda b, h, q_idx, kv_idx: kv_idx < kv_lens[b]


def causal_mod(offset):
    """upper-left with offset 0, lower-right with Tk - Tq"""
    return lambda b, h, q_idx, kv_idx: q_idx + offset >= kv_idx


def window_left_mod(offset, left):
    return lambda b, h, q_idx, kv_idx: kv_idx >= q_idx + offset - left


def window_right_mod(offset, right):
    return lambda b, h, q_idx, kv_idx: kv_idx <= q_idx + offset + right


def score_mod_of(softcap, bias):
    """The score_mod: soft-cap, then bias; None when the problem has neither."""
    if softcap is None and bias is None:
        return None

    if softcap is not None:
        # a 0-dim float64 tensor, not a Python float: dynamo makes a captured float a SymFloat once
        # a second value is seen, which flex_attention refuses (the module's docstring, "softcap")
        softcap = torch.tensor(softcap, dtype=torch.float64)

    def score_mod(score, b, h, q_idx, kv_idx):
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if bias is not None:
            score = score + bias[b, h, q_idx, kv_idx]
        return score
    return score_mod


class Adapter:
    """forward(p): one flex_attention call per problem."""

    def __init__(self):
        self.capabilities = self._probe()
        self.restrictions = []

    def _probe(self):
        """The features a 1-element call with each accepts on this torch."""
        claims = set()
        one = dict(B=1, H=1, H_kv=1, Tq=1, Tk=1, dk=1, dv=1)

        def runs(**features):
            try:
                self.call(**{**one, "dtype": "f32", **features})
                return True
            except (RuntimeError, TypeError, ValueError, NotImplementedError, AssertionError):
                return False

        for name in DTYPES:
            if runs(dtype=name):
                claims.add(name)
        if runs(allow=np.ones((1, 1, 1), bool)):
            claims.add("allow")
        if runs(kv_lens=np.ones(1, np.int32)):
            claims.add("kv_lens")
        if runs(causal="upper-left") and runs(causal="lower-right"):
            claims.add("causal")
        if runs(window=(0, 0)):
            claims.add("window")
        if runs(softcap=1.0):
            claims.add("softcap")
        if runs(bias=np.zeros((1, 1, 1, 1), np.float32)):
            claims.add("bias")
        if runs(H=2):
            claims.add("gqa")
        if runs(want_lse=True):
            claims.add("lse")
        return claims

    def block_mask(self, B, Tq, Tk, allow=None, kv_lens=None, causal="none", window=None):
        """create_block_mask of the problem's mask_mods combined with and_masks; None without any."""
        mods = []
        if allow is not None:
            mods.append(allow_mod(torch.from_numpy(np.array(allow, bool))))
        if kv_lens is not None:
            mods.append(kv_lens_mod(torch.from_numpy(np.array(kv_lens, np.int32))))
        if causal != "none":
            mods.append(causal_mod(0 if causal == "upper-left" else Tk - Tq))
        if window is not None:
            left, right = window
            if left >= 0:
                mods.append(window_left_mod(Tk - Tq, left))
            if right >= 0:
                mods.append(window_right_mod(Tk - Tq, right))
        if not mods:
            return None
        mask_mod = mods[0] if len(mods) == 1 else flex.and_masks(*mods)
        per_batch = allow is not None or kv_lens is not None
        return flex.create_block_mask(mask_mod, B if per_batch else None, None, Tq, Tk, device="cpu")

    def call(self, dtype, B, H, H_kv, Tq, Tk, dk, dv, q=None, k=None, v=None, allow=None, kv_lens=None,
             causal="none", window=None, softcap=None, bias=None, scale=None, want_lse=False):
        """(out, lse or None) from flex_attention, for tensors given as NumPy (zeros when None)."""
        t = DTYPES[dtype]
        tensor = lambda x, shape: (torch.zeros(shape, dtype=t) if x is None
                                   else torch.from_numpy(np.array(x)).to(t))
        q, k, v = tensor(q, (B, H, Tq, dk)), tensor(k, (B, H_kv, Tk, dk)), tensor(v, (B, H_kv, Tk, dv))
        bias = None if bias is None else tensor(bias, (B, H, Tq, Tk))
        kwargs = {}
        if scale is not None:
            kwargs["scale"] = scale
        if H != H_kv:
            kwargs["enable_gqa"] = True
        if want_lse:
            kwargs.update(return_aux=AUX(lse=True)) if AUX is not None else kwargs.update(return_lse=True)
        block_mask = self.block_mask(B, Tq, Tk, allow, kv_lens, causal, window)
        with torch.no_grad():
            result = flex.flex_attention(q, k, v, score_mod=score_mod_of(softcap, bias), block_mask=block_mask,
                                         **kwargs)
        if not want_lse:
            return result, None
        out, aux = result
        return out, (aux.lse if AUX is not None else aux)

    def translate(self, p):
        """The call's arguments for problem p (the keywords of `call`)."""
        if p.dtype not in self.capabilities:
            raise ValueError(f"format {p.dtype} is not claimed")
        if p.backward or p.dropout_p:
            raise ValueError("backward and dropout are not claimed")
        return dict(dtype=p.dtype, B=p.B, H=p.H, H_kv=p.H_kv, Tq=p.Tq, Tk=p.Tk, dk=p.dk, dv=p.dv, q=p.q, k=p.k,
                    v=p.v, allow=p.allow, kv_lens=p.kv_lens, causal=p.causal, window=p.window, softcap=p.softcap,
                    bias=p.bias, scale=p.scale, want_lse=p.want_lse)

    def __call__(self, p):
        out, lse = self.call(**self.translate(p))
        if out.dtype != DTYPES[p.dtype]:
            raise TypeError(f"torch returned {out.dtype} for a {p.dtype} problem")
        out = (out.to(torch.float32) if p.dtype == "bf16" else out).numpy()  # bf16 values, exactly, in float32
        return (out, lse.numpy()) if p.want_lse else out


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve, or None when an option printed what was
    asked (--show-capabilities)."""
    parser = argparse.ArgumentParser(prog="python3 -m attncheck.adapters.flex_attention", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    # the one warning of the eager path ("called without torch.compile()"), said in the docstring
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    adapter = Adapter()
    if args.show_capabilities:
        print(f"torch {torch.__version__}: {' '.join(sorted(adapter.capabilities))}")
        return None
    return dict(forward=adapter, capabilities=adapter.capabilities, restrictions=adapter.restrictions)


def main(argv=None):
    serve("flex_attention", setup(argv))


if __name__ == "__main__":
    main()
