"""Keras 3's attention on its JAX or torch backend (--backend, keras' KERAS_BACKEND; on the CPU), as
a child of `attncheck check --impl-cmd`: `keras.ops.dot_product_attention` (--api ops, a forward) and
`keras.layers.MultiHeadAttention` (--api mha, attncheck's multi-head layer call).

    attncheck check --impl-cmd "KERAS_PYTHON -m attncheck.adapters.keras --api ops|mha"
    attncheck check --impl-cmd "TORCH_PYTHON -m attncheck.adapters.keras --backend torch --api ops|mha"

Each problem is translated into the library's own arguments and the library is called once,
eagerly (as a user calls an op or a layer outside a compiled model), its output returned as it
is: no masking, scaling, NaN handling or re-computation of the adapter's own. Checked with keras
3.15.1 on jax 0.10.2 and jaxlib 0.10.2, numpy 2.3.5 (ci/requirements-keras.txt), and on torch
2.15.0 (ci/requirements-torch.txt). Refuses to run outside the keras 3 releases that have
keras.ops.dot_product_attention (3.6 on, keras PR 20286; keras 2 has no keras.ops), and where keras
was already imported on another backend. Every array reaches keras through keras.ops
(convert_to_tensor, convert_to_numpy), the same code on either backend.

What keras does on JAX (keras/src/backend/jax/nn.py, dot_product_attention): it casts
query, key and value to their keras result type, asks for flash attention only where cuDNN or a
TPU is there (on the CPU flash_attention=None becomes False; the adapter leaves it None), and
calls jax.nn.dot_product_attention(implementation="xla") inside a try/except; when that raises it
logs the exception and computes with its own copy of jax's XLA reference instead. So on the CPU
keras.ops.dot_product_attention is jax.nn.dot_product_attention: every convention of that function
(examples/jax/repro_*.py; adapters/jax.py) is keras' too, inherited, not its own.

What keras does on torch (keras/src/backend/torch/nn.py, dot_product_attention): it casts the
three to their result type, refuses a bias and a mask together ("Only one of `bias` and `mask`
can be provided": NotExpressible here), turns a bool mask into an additive one of 0 and
-0.7 x finfo.max (-0.7 x 65500 in float16; with is_causal it first ands in torch.tril and sets
is_causal False), passes a bias as that additive mask, repeats K and V per group
(repeat_interleave: query head n reads KV head n // (N / K)), asks torch whether its CUDA flash
kernel can run (never on the CPU) and calls torch.nn.functional.scaled_dot_product_attention with
the default backend choice: on the CPU, torch's CPU flash kernel where it takes the inputs, else
its math path. So torch's conventions and findings (adapters/torch_sdpa.py, examples/torch_sdpa/)
come with it. keras' own: a bias with is_causal=True reaches torch as attn_mask with is_causal,
which torch refuses (examples/keras/repro_torch_bias_with_causal_raises.py; keras PR 22097 would
have fixed it, closed unmerged): passed on as raised. dv != dk runs on torch (no restriction).

--api ops, how each feature of a problem reaches keras.ops.dot_product_attention:

  layout      Translated: keras' layout is B,T,N,H. q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv]
              are transposed to it, the output [B,Tq,H,dv] back (exact copies).
  head dims   value must have key's shape ("The value array with the same shape of key"): with
              dv != dk jax raises, keras catches it and its fallback raises in turn ("cannot
              reshape array ...", a TypeError). Declared on jax: restriction equal_head_dims.
  f32, f16, bf16
              keras tensors of the format (bf16 exactly from the float32 holding bf16 values; the
              bfloat16 output widened to float32, exactly). Each claimed only where a 1-element
              call returns that format.
  f64         not claimed: keras' type promotion makes every 64-bit float 32-bit on any backend
              but TensorFlow (keras/src/backend/common/dtypes.py, BIT64_TO_BIT32_DTYPE, "to be
              aligned with JAX's default behavior"), even with jax_enable_x64 set: a float64 call
              is computed in and returns float32 (examples/keras/repro_float64_becomes_float32.py).
  scale       scale= a Python float; absent when the problem says default (keras' 1/sqrt(H)).
  gqa         key and value with H_kv heads as they are (the docstring's GQA: N a multiple of K;
              query head n reads KV head n // (N / K), attncheck's contiguous groups).
  causal      upper-left: is_causal=True (tril, key j <= query i, also when Tq != Tk).
              Translated: lower-right with Tq != Tk, which keras does not have, goes into the bool
              mask (key j allowed when j <= i + Tk - Tq); with Tq == Tk is_causal=True.
  allow       mask= bool [B,1,Tq,Tk], True = take part in attention (keras' polarity).
  kv_lens, window
              Translated: keras.ops.dot_product_attention has neither key lengths nor a window
              (jax's key_value_seq_lengths and local_window_size are not passed through), so both
              go into the bool mask: key j allowed when j < kv_lens[b] and
              i + Tk - Tq - left <= j <= i + Tk - Tq + right (-1 unbounded).
  bias        bias= [B,H,Tq,Tk] in the problem's format, added to the scaled scores.
  not claimed softcap (attn_logits_soft_cap is refused but on a JAX TPU), lse, backward.

--api mha, how a layer call reaches keras.layers.MultiHeadAttention:

  layer       MultiHeadAttention(num_heads=H, key_dim=dk, value_dim=dv, use_bias=..., dropout=0,
              dtype=the format), built for query [B,Tq,D] and value [B,Tk,D] (output_shape None:
              the output is D wide); its kernels set from the call's weights: query and key
              [D,H,dk] (w_q, w_k reshaped), value [D,H,dv], attention_output [H,dv,D] (w_o), biases
              [H,dk], [H,dv], [D]. key_dim and value_dim are keras' own: dk and dv need not be D/H,
              nor equal; but with value_dim != key_dim a call without the weights raises on JAX
              (the op path, above: jax refuses dv != dk and keras' fallback cannot reshape;
              examples/keras/repro_mha_value_dim_unlike_key_dim_raises.py), a finding of keras',
              passed on as raised, not NotExpressible; with the weights asked it runs.
  biases      use_bias=True when the call gives any bias; one it does not give is then a zero
              bias (the protocol's missing bias is zero: the same layer). use_bias=False when none.
  x           query=x_q, value=key=x_kv (the same array for self-attention).
  heads       one num_heads: H_kv != H is not expressible (keras has a separate
              GroupedQueryAttention layer); gqa is not claimed.
  scale       fixed 1/sqrt(key_dim): declared restriction default_scale.
  causal      upper-left: use_causal_mask=True (keras' own mask, row >= column: upper-left when
              Tq != Tk). Translated: lower-right with Tq != Tk into attention_mask.
  window      sliding_window=L+1 when the window is (L, L) and the diagonal is the main one (on a keras
              whose MultiHeadAttention has sliding_window, as 3.15.1 has)
              (|i - j| < sliding_window, keras' symmetric band); Translated: any other window into
              attention_mask, as the ops' (above).
  allow       attention_mask= bool [B,Tq,Tk], True = may attend.
  kv_lens     value_mask= bool [B,Tk], True = a key (keras' own padding mask of value and key).
  weights     return_attention_scores=True: (out, scores [B,H,Tq,Tk]). This takes keras' other
              path: no ops.dot_product_attention but its own einsum and a Softmax layer that sets
              forbidden scores to -1e9 (-3e4 for float16) and zeroes their weights afterwards
              (keras/src/layers/activations/softmax.py); without weights the layer calls
              ops.dot_product_attention (above). So an empty row is 0 with the weights asked and
              the mean of V without (examples/keras/repro_empty_row_is_the_mean.py).
  formats     f32, f16, bf16 where a 1-element call returns that format; f64 not (as the ops').

Measured (2026-12-03, seed 1, --empty-rows mean --masked-inputs finite): --api ops, f32 100 cases,
f16 and bf16 60: only jax's deviations below (a row of -inf scores NaN, a permitted score below the
mask value losing to forbidden keys, an empty row over the mask's keys alone when a -inf bias
forbids the rest); --api mha, f32 60 and f16/bf16 60: the TypeError of value_dim != key_dim, an
empty row of 0 where the weights are asked and the mean where not (no --empty-rows policy takes
both; examples/keras/repro_empty_row_is_the_mean.py), and in f16
one weight 1.04 times its bound: the scores path (return_attention_scores) rounds its scores to
float16 before the softmax (examples/keras/repro_mha_f16_scores_rounded.py). Every case
compiles anew (a new shape nearly every case: 2 to 4 s here): run with --case-timeout 120.
On torch (2026-12-04, seed 1; 40 to 60 cases a second, nothing compiles; docs/conformance.md,
keras-ops-torch): --api ops torch's own findings (its CPU flash kernel's NaN rows under a causal
mask with a scale <= 0), its additive mask's (an empty row the mean of V; in float16 a forbidden
score above 45850 beats a permitted one) and keras' raise of a bias with is_causal; --api mha (60 s)
the same empty row of 0 with the weights and the mean without.

Conventions (inherited from jax.nn.dot_product_attention on the ops path on JAX; keras' own additive
mask on torch): a forbidden score is the finite -0.7 x finfo.max, so a row with no permitted key is the mean of V over all keys
(--empty-rows mean) and a NaN in a forbidden key or value reaches the output (--masked-inputs
finite); examples/keras/repro_*.py show each with keras alone. The mha path's weights use keras'
Softmax layer instead (an empty row 0 there). The conventions run:

    attncheck check --impl-cmd "KERAS_PYTHON -m attncheck.adapters.keras" --empty-rows mean --masked-inputs finite
    attncheck check --impl-cmd "TORCH_PYTHON -m attncheck.adapters.keras --backend torch" --empty-rows mean --masked-inputs finite
"""
import argparse
import inspect
import logging
import math
import os
import warnings

import numpy as np

from . import NotExpressible, library, refuse, serve

BACKENDS = ("jax", "torch")
DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
APIS = ("ops", "mha")
keras = None  # imported by load(), on the backend asked


def load(backend):
    """keras imported on `backend` (KERAS_BACKEND is read once, at keras' import: so here, not at the
    module's), the backend's version said too; one line and exit 2 if keras already runs on another."""
    global keras
    if keras is None:
        os.environ["KERAS_BACKEND"] = backend
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        keras = library("keras", "keras", entry="ops.dot_product_attention", since="3.6")  # keras PR 20286
        library(backend, "keras")
        # keras logs, with a traceback, each jax.nn.dot_product_attention it falls back from: quiet on stderr.
        logging.getLogger().setLevel(logging.CRITICAL)
    if keras.backend.backend() != backend:
        refuse("keras", f"keras runs on its {keras.backend.backend()} backend here, not {backend} (KERAS_BACKEND)")
    return keras


def _numpy(x):
    """A keras tensor as NumPy: bfloat16 widened to float32 (exactly), others as they are."""
    x = keras.ops.convert_to_numpy(x)
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def _array(x, dtype):
    """x as a keras tensor of the format (bf16 exactly, from the float32 holding bf16 values)."""
    return keras.ops.convert_to_tensor(np.ascontiguousarray(x), dtype=DTYPES[dtype])


def _returned(out, dtype, what):
    if keras.backend.standardize_dtype(out.dtype) != DTYPES[dtype]:
        raise TypeError(f"keras returned {out.dtype} for a {dtype} {what}")


def allowed_mask(c, native_causal, native_window=False, native_kv_lens=False):
    """The bool [B,Tq,Tk] (True = may attend) of what c (a Problem or a Layer) forbids that keras has
    no native form for, or None: the allow mask, lower-right causal when not native, the window when
    not native, key lengths when not native."""
    d = c.Tk - c.Tq
    i = np.arange(c.Tq)[:, None]
    j = np.arange(c.Tk)[None, :]
    rules = []
    if c.causal == "lower-right" and not native_causal:
        rules.append(j <= i + d)
    elif c.causal == "upper-left" and not native_causal:
        rules.append(j <= i)
    if c.window is not None and not native_window:
        left, right = c.window
        if left >= 0:
            rules.append(j >= i + d - left)
        if right >= 0:
            rules.append(j <= i + d + right)
    if c.kv_lens is not None and not native_kv_lens:
        rules.append(np.arange(c.Tk)[None, None, :] < np.asarray(c.kv_lens)[:, None, None])
    if c.allow is None and not rules:
        return None
    allowed = np.ones((c.B, c.Tq, c.Tk), bool) if c.allow is None else c.allow.copy()
    for rule in rules:
        allowed &= np.broadcast_to(rule, allowed.shape)
    return allowed


# --api ops ------------------------------------------------------------------------------------------

def translate(p):
    """keras.ops.dot_product_attention's keyword arguments for problem p (arrays in keras' B,T,N,H)."""
    if p.dtype not in DTYPES:
        raise ValueError(f"format {p.dtype} is not claimed")
    if p.softcap is not None or p.want_lse:
        raise ValueError("a soft-cap or lse is not claimed")
    if p.dv != p.dk and keras.backend.backend() == "jax":
        raise NotExpressible(f"dv != dk: keras.ops.dot_product_attention on jax takes a value of the key's shape "
                             f"(dv {p.dv}, dk {p.dk})")
    bthd = lambda x: _array(np.transpose(x, (0, 2, 1, 3)), p.dtype)
    is_causal = p.causal == "upper-left" or (p.causal == "lower-right" and p.Tq == p.Tk)
    args = dict(query=bthd(p.q), key=bthd(p.k), value=bthd(p.v), bias=None, mask=None, scale=None,
                is_causal=is_causal)
    if p.scale is not None:
        args["scale"] = float(p.scale)
    allowed = allowed_mask(p, native_causal=is_causal or p.causal == "none")
    if allowed is not None and p.bias is not None and keras.backend.backend() == "torch":
        raise NotExpressible("a bias and a mask: keras on torch takes one of them (\"Only one of `bias` and `mask` "
                             "can be provided\", keras/src/backend/torch/nn.py)")
    if allowed is not None:
        args["mask"] = keras.ops.convert_to_tensor(allowed[:, None])  # [B,1,Tq,Tk], broadcast over heads
    if p.bias is not None:
        args["bias"] = _array(p.bias, p.dtype)  # [B,H,Tq,Tk]
    return args


def forward(p):
    out = keras.ops.dot_product_attention(**translate(p))
    _returned(out, p.dtype, "problem")
    return np.ascontiguousarray(np.transpose(_numpy(out), (0, 2, 1, 3)))


def ops_formats():
    """The formats a 1-element keras.ops.dot_product_attention call returns in the same format."""
    claims = set()
    for name, dtype in DTYPES.items():
        x = keras.ops.ones((1, 1, 1, 1), dtype)
        try:
            if keras.backend.standardize_dtype(keras.ops.dot_product_attention(x, x, x).dtype) == dtype:
                claims.add(name)
        except Exception:  # noqa: BLE001 (whatever keras raises, the format is not claimed)
            pass
    return claims


# --api mha ------------------------------------------------------------------------------------------

def layer_module(m):
    """The keras.layers.MultiHeadAttention of the Layer m, built, its variables the call's weights."""
    if m.H_kv != m.H:
        raise NotExpressible(f"H_kv != H: keras.layers.MultiHeadAttention has one num_heads for queries, keys and "
                             f"values (H_kv {m.H_kv}, H {m.H})")
    if m.dtype not in DTYPES:
        raise ValueError(f"format {m.dtype} is not claimed")
    biases = [getattr(m, n) for n in ("b_q", "b_k", "b_v", "b_o")]
    use_bias = any(b is not None for b in biases)
    window = None
    sliding_window = "sliding_window" in inspect.signature(keras.layers.MultiHeadAttention.__init__).parameters
    if sliding_window and m.window is not None and m.window[0] == m.window[1] and m.window[0] >= 0 and m.Tq == m.Tk:
        window = m.window[0] + 1
    native = {} if window is None else {"sliding_window": window}  # an argument of recent keras 3 releases only
    layer = keras.layers.MultiHeadAttention(num_heads=m.H, key_dim=m.dk, value_dim=m.dv, dropout=0.0,
                                            use_bias=use_bias, dtype=DTYPES[m.dtype], **native)
    layer.build((m.B, m.Tq, m.D), (m.B, m.Tk, m.D))
    H, dk, dv, D = m.H, m.dk, m.dv, m.D
    zero = lambda *shape: np.zeros(shape)
    parts = [(layer.query_dense, m.w_q, (D, H, dk), m.b_q, (H, dk)),
             (layer.key_dense, m.w_k, (D, H, dk), m.b_k, (H, dk)),
             (layer.value_dense, m.w_v, (D, H, dv), m.b_v, (H, dv)),
             (layer.output_dense, m.w_o, (H, dv, D), m.b_o, (D,))]
    for dense, w, shape, b, bshape in parts:
        dense.kernel.assign(_array(np.reshape(w, shape), m.dtype))
        if use_bias:
            dense.bias.assign(_array(zero(*bshape) if b is None else np.reshape(b, bshape), m.dtype))
    return layer, window


def layer(m):
    """(out [B,Tq,D], or (out, weights [B,H,Tq,Tk]) when asked) as keras returns them for the Layer m."""
    if m.scale is not None and m.scale != 1 / math.sqrt(m.dk):
        raise NotExpressible(f"keras.layers.MultiHeadAttention always scales by 1/sqrt(key_dim): the explicit scale "
                             f"{m.scale!r} cannot be passed")
    module, window = layer_module(m)
    use_causal = m.causal == "upper-left" or (m.causal == "lower-right" and m.Tq == m.Tk)
    allowed = allowed_mask(m, native_causal=use_causal or m.causal == "none", native_window=window is not None,
                           native_kv_lens=True)
    x_q = _array(m.x_q, m.dtype)
    x_kv = x_q if m.self_attention else _array(m.x_kv, m.dtype)
    value_mask = None
    if m.kv_lens is not None:
        value_mask = keras.ops.convert_to_tensor(np.arange(m.Tk)[None, :] < np.asarray(m.kv_lens)[:, None])  # True = a key
    result = module(x_q, x_kv, key=x_kv, value_mask=value_mask,
                    attention_mask=None if allowed is None else keras.ops.convert_to_tensor(allowed),
                    use_causal_mask=use_causal, return_attention_scores=m.want_weights)
    out, weights = result if m.want_weights else (result, None)
    _returned(out, m.dtype, "layer")
    if m.want_weights:
        return _numpy(out), _numpy(weights)
    return _numpy(out)


def layer_formats():
    """The formats and features a 1-element layer call (D = H = 2) runs with."""
    from .._layer import Layer
    from .._protocol import layer_payload, to_bf16_bits, STORAGE

    def runs(dtype="f32", want_weights=False):
        enc = (lambda x: to_bf16_bits(np.asarray(x, np.float32)).tobytes()) if dtype == "bf16" else \
            (lambda x: np.asarray(x, STORAGE[dtype]).tobytes())
        one = lambda *shape: enc(np.full(shape, 0.5))
        payload = layer_payload(dtype, (1, 2, 2, 1, 1, 1, 1), 2, "none", None, x_q=one(1, 1, 2), w_q=one(2, 2),
                                w_k=one(2, 2), w_v=one(2, 2), w_o=one(2, 2), b_q=one(2), b_k=one(2), b_v=one(2),
                                b_o=one(2), want_weights=want_weights)
        try:
            with warnings.catch_warnings():  # keras warns of a softmax over one key
                warnings.simplefilter("ignore")
                result = layer(Layer(payload))
            out = result[0] if want_weights else result
            return out.shape == (1, 1, 2) and (not want_weights or result[1].shape == (1, 2, 1, 1))
        except Exception:  # noqa: BLE001
            return False

    claims = {name for name in DTYPES if runs(name)}
    if runs(want_weights=True):
        claims.add("mha_weights")
    return claims


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve, or None when --show-capabilities printed them."""
    parser = argparse.ArgumentParser(prog="python -m attncheck.adapters.keras", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=APIS, default="ops",
                        help="ops: keras.ops.dot_product_attention; mha: keras.layers.MultiHeadAttention (default ops)")
    parser.add_argument("--backend", choices=BACKENDS, default="jax",
                        help="the keras backend to run on: its KERAS_BACKEND (default jax)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    options = parser.parse_args(argv)
    load(options.backend)
    if options.api == "ops":
        claims = ops_formats() | {"allow", "causal", "kv_lens", "window", "gqa", "bias"}
        restrictions = ["equal_head_dims"] if options.backend == "jax" else []
        served = dict(forward=forward, capabilities=claims, restrictions=restrictions)
    else:
        claims = layer_formats() | {"mha", "allow", "causal", "kv_lens", "window"}
        served = dict(layer=layer, capabilities=claims, restrictions=["default_scale"])
    if options.show_capabilities:
        print(f"keras {keras.__version__} on {options.backend}, api {options.api}: {' '.join(sorted(claims))}")
        return None
    return served


def main(argv=None):
    serve("keras", setup(argv))


if __name__ == "__main__":
    main()
