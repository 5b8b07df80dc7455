"""JAX's `jax.nn.dot_product_attention` (implementation="xla" by default) on the CPU, as a child of
`attncheck check --impl-cmd`.

    attncheck check --impl-cmd "VENV_PYTHON -m attncheck.adapters.jax [--implementation xla|cudnn]
                               [--enable-x64] [--jit auto|always|never] [--pad-head-dims]"

Each problem is translated into the function's own arguments and the function is called (under
jax.jit for f32 and f64), its output returned as it is: no masking, scaling, NaN handling or
re-computation of the adapter's own. Checked with jax 0.10.2 and jaxlib 0.10.2 (ci/requirements.txt:
the newest with a wheel for CPython 3.11) over numpy 2.3.5, and before with jax 0.7.1 over numpy 1.26.4.

Releases: jax 0.4.31 and later (the first with jax.nn.dot_product_attention, jax PR 21371; an older
one is refused in one line, exit 2). key_value_seq_lengths and local_window_size (jax PR 23247) came
later, and 0.4.31 refuses grouped KV heads: kv_lens, window and gqa are claimed only where the
function has them (0.4.38 has all three).

Compiling. f32 and f64 problems are run under one module-level jax.jit of the call; JAX keeps one
compiled function per signature (shapes, dtypes, which of bias, mask, key lengths, window and
scale are given, is_causal). The scale and the window's two sizes are passed as traced scalars,
not Python constants, so a campaign's many scales and windows do not each compile again: the scale
as a scalar of the logits' format (float32 for f32, f16 and bf16; float64 for f64), which is what
the function itself makes of a Python float (`jnp.array(scale, dtype=logits.dtype)`); the window
sizes as int32 scalars, used by its window mask only in comparisons. f16 and bf16 problems are run
op by op (eagerly, each primitive compiled and cached by JAX): under jax.jit the function raises on
the CPU for f16 ("The precision 'F16_F16_F32' is not supported by dot_general on CPU") and for bf16
(jax 0.10.2: "Algorithm not supported by the ElementalIrEmitter: ALG_DOT_BF16_BF16_F32"; jax 0.7.1,
for some shapes: "UNIMPLEMENTED: Dot with multiple contracting dimensions is not implemented"). It asks its score einsum for
DotAlgorithmPreset.F16_F16_F32 (BF16_BF16_F32) and falls back to the default precision in a
try/except, which catches the refusal only when the einsum runs at once, not when it is traced and
compiled later (repro_jit_half_formats_raise.py; keras-hub PR 2354 met the float16 one). --jit
always shows it through attncheck, --jit never runs everything op by op. Op by op, the bfloat16
backward still raises for some shapes (repro_bf16_backward_raises.py). A refused compile, caught
or not, often leaves the process to die later of SIGSEGV or SIGABRT (glibc: "double free or
corruption"): attncheck reports a crash (repro_abort_after_refused_half_dots.py).

A campaign draws a new shape for nearly every case, so compiling dominates: 0.4 to 1.3 s for a new
f32 shape (forward, backward), 1.3 to 4.5 s op by op for f16 and bf16, against 1 to 75 ms once
compiled; 1 to 12 cases/s here. attncheck's adaptive case timeout (ten times the slowest earlier
call of a comparable size, at least 1 s) then takes a new shape's compile for a hang: run with
--case-timeout 30.

How each feature of a problem reaches the function:

  layout      Translated: JAX's layout is B,T,N,H (batch, time, heads, head dim). q [B,H,Tq,dk],
              k [B,H_kv,Tk,dk] and v [B,H_kv,Tk,dv] are transposed to [B,Tq,H,dk], [B,Tk,H_kv,dk],
              [B,Tk,H_kv,dv], and the output [B,Tq,H,dv] back to [B,H,Tq,dv] (exact copies).
              JAX requires value to have key's shape, so dv != dk is refused by the function
              ("value shape should be ...", repro_dv_unlike_dk_refused.py): the adapter raises
              NotExpressible for it before calling, naming the limit (attncheck reports it as
              raised; ci/conformance as a limit), and does not adapt it. That is most drawn cases, dk and dv being drawn
              apart, and it hides the rest (e.g. the window bug below): --pad-head-dims, off by
              default, is an emulation, not the function's own: q, k and v get zero columns up to
              max(dk, dv) (scores unchanged: the extra products are 0), the scale is passed as
              1/sqrt(dk) when the problem says default (the function's own would be that of the
              padded width), and the first dv columns of the output are returned (of dq and dk
              the first dk, of dv the first dv).
  f32, f16    jnp arrays of float32, float16 as they are.
  bf16        the float32 values holding bf16 values cast to jnp.bfloat16 (exact); the bfloat16
              output is widened to float32 (exact) for the protocol.
  f64         only with --enable-x64, which sets jax_enable_x64 (without it JAX makes every
              float64 array float32) and then claims f64. Not the default: the function keeps its
              softmax in float32 whatever the format ("Softmax and it is always carried out in
              fp32", jax/_src/nn/functions.py), so a float64 problem is not computed in float64,
              and its mask value -0.7 x finfo(float64).max becomes -inf in that cast, so an empty
              row is NaN (repro_float64_softmax_in_float32.py).
  scale       scale= (a traced scalar, above); absent when the problem says default, so the
              function uses its own 1/sqrt(H), H the head dim.
  gqa         key and value with H_kv heads as they are: the function groups query heads as
              N = K x G, query head n reading KV head n // G (G = H / H_kv), contiguous groups as
              attncheck's contract says (query head h reads KV head h // (H / H_kv)).
  causal      upper-left: is_causal=True (jnp.tril: key j <= query i, the function's alignment
              when Tq != Tk). Translated: lower-right with Tq != Tk, which the function does not
              have, becomes part of the bool mask (key j allowed when j <= i + Tk - Tq); with
              Tq == Tk the two coincide and is_causal=True is used.
  allow       mask= bool [B,1,Tq,Tk] (True = attend), broadcast over heads by the function.
  kv_lens     key_value_seq_lengths= int32 [B] (query_seq_lengths is not given: attncheck has no
              query lengths).
  window      local_window_size=(L, R). The function's window is on absolute indices: key j is
              seen by query i when i - L <= j <= i + R (_get_window_mask: i <= j + L and
              i >= j - R); attncheck's is anchored at the lower-right diagonal,
              i + Tk - Tq - left <= j <= i + Tk - Tq + right, -1 unbounded. Translated: with
              d = Tk - Tq, L = left - d and R = right + d (the same rule; d = 0 when Tq == Tk); an
              unbounded side becomes Tq (left) or Tk (right), which bounds nothing. When Tq != Tk
              makes L or R negative (outside the sizes the function documents) the window is
              put into the bool mask instead.
  bias        bias= [B,H,Tq,Tk] in the problem's format, added to the scaled scores (-inf forbids:
              it stays -inf, a weight of 0).
  backward    jax.vjp of the same call (JAX's autodiff of its own function), cotangent dout:
              (dq, dk, dv), transposed back like the output.
  not claimed softcap (no such argument), lse (the function returns the output alone).

The function's conventions (jax/_src/nn/functions.py, _apply_masks): a forbidden score is replaced
by the finite -0.7 x finfo(logits dtype).max, so a row with no permitted key gives the uniform
mean of V over all Tk keys (attncheck's --empty-rows mean; but over the mask's forbidden keys
only when a bias of -inf forbids the others), and a NaN or inf in a forbidden key or value still
reaches the output through 0 x NaN (--masked-inputs finite). A permitted score of -inf, or below
the mask value, loses to the forbidden keys, and a row of -inf scores is NaN: findings under
--empty-rows mean too. Before 0.8.2 jax ignored local_window_size when no mask, is_causal or key
lengths were given (jax issue 32300): a finding there, not worked around. The scripts
examples/jax/repro_*.py show each with jax and numpy alone. The conventions run:

    attncheck check --impl-cmd "VENV_PYTHON -m attncheck.adapters.jax" --empty-rows mean --masked-inputs finite
"""
import argparse
import inspect
import os
import sys

import numpy as np

from . import NotExpressible, library, serve

CAPABILITIES = {"f32", "f16", "bf16", "allow", "causal", "kv_lens", "gqa", "window", "bias", "backward"}

JIT_FAILS = {"f16", "bf16"}  # formats whose jitted call raises on the CPU (repro_jit_half_formats_raise.py)

jax = jnp = None  # imported by load(), after the platform is chosen
_calls = {}  # (jitted or not, forward or backward) -> the callable
IMPLEMENTATION = "xla"
JIT = "auto"
PAD_HEAD_DIMS = False


def load(enable_x64=False, implementation="xla", jit="auto", pad_head_dims=False):
    """Imports jax on the CPU (JAX_PLATFORMS=cpu unless set) and makes the calls, jitted and not."""
    global jax, jnp, IMPLEMENTATION, JIT, PAD_HEAD_DIMS
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = library("jax", "jax", entry="nn.dot_product_attention", since="0.4.31")  # jax PR 21371
    import jax.numpy as jnp_module
    jnp = jnp_module
    if enable_x64:
        jax.config.update("jax_enable_x64", True)
    IMPLEMENTATION, JIT, PAD_HEAD_DIMS = implementation, jit, pad_head_dims

    def attention(q, k, v, bias, mask, kv_lens, window, scale, is_causal, implementation):
        # only the arguments given: a release before key_value_seq_lengths and local_window_size has neither
        given = {name: x for name, x in (("key_value_seq_lengths", kv_lens), ("local_window_size", window))
                 if x is not None}
        return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=scale, is_causal=is_causal,
                                            implementation=implementation, **given)

    def gradients(q, k, v, bias, mask, kv_lens, window, scale, dout, is_causal, implementation):
        _, pullback = jax.vjp(
            lambda q, k, v: attention(q, k, v, bias, mask, kv_lens, window, scale, is_causal, implementation), q, k, v)
        return pullback(dout)

    static = ("is_causal", "implementation")
    _calls.update({(True, "forward"): jax.jit(attention, static_argnames=static),
                   (True, "backward"): jax.jit(gradients, static_argnames=static),
                   (False, "forward"): attention, (False, "backward"): gradients})
    return jax


def jitted(dtype):
    """Whether a problem of this format is run under jax.jit (--jit)."""
    return JIT == "always" or (JIT == "auto" and dtype not in JIT_FAILS)


def formats():
    """The problem formats claimed, each with the jnp dtype its arrays are given in."""
    table = {"f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16}
    if jax.config.jax_enable_x64:
        table["f64"] = jnp.float64
    return table


def translate(p):
    """The function's arguments for problem p, as a dict (arrays in JAX's B,T,N,H layout)."""
    table = formats()
    if p.dtype not in table:
        raise ValueError(f"format {p.dtype} is not claimed" + (" (run with --enable-x64)" if p.dtype == "f64" else ""))
    if p.softcap is not None or p.want_lse:
        raise ValueError("a soft-cap or lse is not claimed")
    if p.dv != p.dk and not PAD_HEAD_DIMS:
        raise NotExpressible(f"dv != dk: the function takes a value of the key's shape (B,T,K,H: one head width "
                             f"H), and refuses any other (dv {p.dv}, dk {p.dk}); --pad-head-dims emulates it")
    dtype = table[p.dtype]
    logits_dtype = jnp.float64 if p.dtype == "f64" else jnp.float32  # jnp.promote_types(query.dtype, float32)
    width = max(p.dk, p.dv) if PAD_HEAD_DIMS else None  # --pad-head-dims: zero columns up to one head width

    def bthd(x):
        x = np.transpose(x, (0, 2, 1, 3))
        if width is not None and x.shape[3] < width:
            x = np.concatenate([x, np.zeros(x.shape[:3] + (width - x.shape[3],), x.dtype)], axis=3)
        return jnp.asarray(np.ascontiguousarray(x), dtype=dtype)

    args = {"q": bthd(p.q), "k": bthd(p.k), "v": bthd(p.v), "bias": None, "mask": None, "kv_lens": None,
            "window": None, "scale": None, "is_causal": False, "implementation": IMPLEMENTATION}
    if p.scale is not None:
        args["scale"] = jnp.asarray(p.scale, dtype=logits_dtype)
    elif width is not None and width != p.dk:  # the function's default would be 1/sqrt(the padded width)
        args["scale"] = jnp.asarray(1 / np.sqrt(p.dk), dtype=logits_dtype)
    d = p.Tk - p.Tq
    i = np.arange(p.Tq)[:, None]
    j = np.arange(p.Tk)[None, :]
    allowed = None if p.allow is None else p.allow.copy()  # [B,Tq,Tk]

    def also(rule):
        nonlocal allowed
        rule = np.broadcast_to(rule, (p.B, p.Tq, p.Tk))
        allowed = rule.copy() if allowed is None else allowed & rule

    if p.causal == "upper-left" or (p.causal == "lower-right" and d == 0):
        args["is_causal"] = True
    elif p.causal == "lower-right":
        also(j <= i + d)  # translated: the function's causal mask is upper-left
    if p.window is not None:
        left, right = p.window
        L = p.Tq if left < 0 else left - d
        R = p.Tk if right < 0 else right + d
        if L >= 0 and R >= 0:
            args["window"] = (jnp.asarray(L, jnp.int32), jnp.asarray(R, jnp.int32))
        else:  # translated: a window the function's sizes cannot say
            if left >= 0:
                also(j >= i + d - left)
            if right >= 0:
                also(j <= i + d + right)
    if p.kv_lens is not None:
        args["kv_lens"] = jnp.asarray(p.kv_lens, jnp.int32)
    if allowed is not None:
        args["mask"] = jnp.asarray(allowed[:, None])  # [B,1,Tq,Tk], broadcast over heads
    if p.bias is not None:
        args["bias"] = jnp.asarray(p.bias, dtype=dtype)  # [B,H,Tq,Tk]
    return args


def _numpy(x):
    """A JAX array as NumPy: bfloat16 widened to float32 (exactly), others as they are."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def _bhtd(x):
    return np.ascontiguousarray(np.transpose(_numpy(x), (0, 2, 1, 3)))


def forward(p):
    args = translate(p)
    return _bhtd(_calls[jitted(p.dtype), "forward"](**args))[..., :p.dv]


def backward(p, dout):
    args = translate(p)
    dout = np.transpose(dout, (0, 2, 1, 3))
    width = args["v"].shape[3]
    if dout.shape[3] < width:  # --pad-head-dims: the padded output columns get no cotangent
        dout = np.concatenate([dout, np.zeros(dout.shape[:3] + (width - dout.shape[3],), dout.dtype)], axis=3)
    args["dout"] = jnp.asarray(np.ascontiguousarray(dout), dtype=args["q"].dtype)
    dq, dk, dv = _calls[jitted(p.dtype), "backward"](**args)
    return _bhtd(dq)[..., :p.dk], _bhtd(dk)[..., :p.dk], _bhtd(dv)[..., :p.dv]


def capabilities():
    """CAPABILITIES on this jax: key lengths and the window only where the function has key_value_seq_lengths and
    local_window_size (jax 0.4.31, the first with it, has neither; jax PR 23247 added the window), grouped KV
    heads where it groups them (not 0.4.31), f64 with --enable-x64."""
    parameters = inspect.signature(jax.nn.dot_product_attention).parameters
    later = {"kv_lens": "key_value_seq_lengths", "window": "local_window_size"}
    lacking = {claim for claim, argument in later.items() if argument not in parameters}
    if not takes_grouped_heads():
        lacking.add("gqa")
    return (CAPABILITIES - lacking) | ({"f64"} if jax.config.jax_enable_x64 else set())


def takes_grouped_heads():
    """Whether a 1-element call with 2 query heads and 1 KV head runs: jax 0.4.31 refuses it ("query shape
    should be [1, -1, 1, 1]"), later releases group the query heads."""
    try:
        jax.nn.dot_product_attention(jnp.ones((1, 1, 2, 1)), jnp.ones((1, 1, 1, 1)), jnp.ones((1, 1, 1, 1)))
        return True
    except Exception:  # a probe: whatever a release raises, it does not take them
        return False


def setup(argv=None):
    """The options parsed and jax loaded: the keywords of attncheck.serve (forward, capabilities, backward)."""
    parser = argparse.ArgumentParser(prog="python -m attncheck.adapters.jax", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--implementation", choices=("xla", "cudnn"), default="xla",
                        help="the function's implementation= (default xla; cudnn needs an NVIDIA GPU and "
                             "cuDNN, which this machine lacks: every call then fails)")
    parser.add_argument("--enable-x64", action="store_true",
                        help="set jax_enable_x64 and claim f64 (the softmax still runs in float32)")
    parser.add_argument("--jit", choices=("auto", "always", "never"), default="auto",
                        help="call the function under jax.jit: auto (the default) for f32 and f64, and op by op "
                             "for f16 and bf16, whose jitted call raises on the CPU; always; never")
    parser.add_argument("--pad-head-dims", action="store_true",
                        help="emulated, not the function's: when dv != dk, which the function refuses, pad q, k "
                             "and v with zero columns to max(dk, dv), pass the scale 1/sqrt(dk) when the problem "
                             "says default, and return the first dv columns (and dq, dk, dv cut likewise)")
    options = parser.parse_args(argv)
    load(options.enable_x64, options.implementation, options.jit, options.pad_head_dims)
    # The function takes a value of the key's shape: dk = dv only.
    return dict(forward=forward, capabilities=capabilities(), backward=backward, restrictions=["equal_head_dims"])


def main(argv=None):
    serve("jax", setup(argv))


if __name__ == "__main__":
    main()
