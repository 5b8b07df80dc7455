"""OpenVINO's own ScaledDotProductAttention operator (opset13.scaled_dot_product_attention, the CPU
plugin's node), as a child of `attncheck check --impl-cmd`.

For each problem it builds a one-op model (Parameters q, k, v and the mask, the scale a Constant),
compiles it for "CPU" with Core.compile_model and returns the operator's output, nothing else: no
masking, scaling, NaN handling or re-computation of its own. Compiled models are cached per
(format, shapes, mask kind, scale, causal, precision), so a campaign is not dominated by compiling
(about 50 ms each).

  build/cli/attncheck check --impl-cmd "VENV_PYTHON -m attncheck.adapters.openvino [--precision f32|default]"

(--op paged runs OpenVINO's PagedAttentionExtension instead, the paged-KV op:
attncheck.adapters.openvino_paged.)

with PYTHONPATH=python and a venv holding openvino 2026.4.1 (numpy 2.3.5, openvino-telemetry 2025.2.0).

--precision f32 (the default here): compile_model(..., {"INFERENCE_PRECISION_HINT": "f32"}), so a
  float32 or float16 model is computed in float32. --precision default: no config, OpenVINO's own
  choice, which is bf16 on a CPU with AVX512-BF16 or AMX (the inputs and the output stay f32 or f16;
  the node runs in bf16). `--report-precision` prints what the compiled model ran on this machine
  (its INFERENCE_PRECISION_HINT and the attention node's runtimePrecision) and exits.

How each feature of a problem reaches the operator:

  q, k, v     query [B,H,Tq,dk], key [B,H,Tk,dk], value [B,H,Tk,dv] as they are (4-D inputs).
  f32, f16    element types f32 and f16. bf16 (values as bf16 bit patterns in an ov.Tensor of
              type bf16): the CPU node takes bf16 itself. Not claimed: f64 (the CPU plugin converts
              f64 to f32, or bf16 under the default hint, around the node: not this kernel in f64).
  scale       the operator's scale input, a scalar Constant of the query's element type (the
              spec's type T: a float32 scale with f16 inputs is refused), so the problem's double
              is rounded to float32, float16 or bfloat16 (to nearest even) as the format is;
              absent when the problem says default, so the operator uses its own 1/sqrt(dk),
              which the spec computes in the query's type too. A Constant is what exporters emit;
              the plugin picks its fused attention (runtime layerType "Subgraph") or a
              decomposition (MatMul, Softmax, MatMul) by the model, and a Parameter scale would
              change that choice.
  causal      upper-left: causal=True, the spec's triu(-inf, k=1), alone. Translated: the spec's
              causal=True ignores attention_mask, so a causal problem that also has an allow mask,
              key lengths or a bias has its causal rule (j <= i) in the one attention_mask
              instead, and lower-right with Tq != Tk (which the operator does not have) is always
              in the mask (j <= i + Tk - Tq); lower-right with Tq == Tk is causal=True.
  allow       a boolean attention_mask [B,1,Tq,Tk] (True = attend: the spec's
              Select(LogicalNot(mask), -inf, 0)), broadcast over heads.
  kv_lens     Translated: the operator has no key lengths, so key j >= kv_lens[b] is False in the
              boolean attention_mask.
  bias        a float attention_mask [B,H,Tq,Tk] of the format (added to the scores, -inf
              forbids). Translated: with an allow mask, key lengths or a causal rule in the mask
              as well, the one mask is float: the bias where allowed, -inf where not (what the
              spec's Select gives a boolean mask).
  not claimed gqa: the spec has no grouped heads (key's dims must match the query's or broadcast:
              H_kv = 1 broadcasts, H_kv = 2 of 4 is refused at validation; exporters repeat the KV
              heads, which would be emulation). Nor window, softcap, lse (no such inputs or outputs)
              or backward (an inference runtime).

A row with no permitted key: the spec's pseudo-code gives it softmax(all -inf) = NaN (OpenVINO issue
35959, open: a PR proposes 0), so OpenVINO's documented convention is --empty-rows nan.
"""
import argparse
import functools
import importlib
import math

import numpy as np

from . import library, refuse, serve

ov = library("openvino", "openvino")
try:
    opset = importlib.import_module("openvino.opset13")  # 2024's layout
except ImportError:
    opset = importlib.import_module("openvino.runtime.opset13")  # 2023's (2023.3's documentation has the operator)
if not hasattr(opset, "scaled_dot_product_attention"):
    refuse("openvino", f"openvino {ov.__version__}'s opset13 has no scaled_dot_product_attention")

CAPABILITIES = {"f32", "f16", "bf16", "allow", "causal", "kv_lens", "bias"}
ELEMENT = {"f32": ov.Type.f32, "f16": ov.Type.f16, "bf16": ov.Type.bf16}
PRECISIONS = ("f32", "default")
_CORE = ov.Core()


def scale_constant_value(dtype, scale):
    """The problem's scale as the operator gets it: rounded once to the format (T)."""
    if dtype == "f32":
        return np.float32(scale)
    if dtype == "f16":
        return np.float16(scale)
    mantissa, exponent = math.frexp(scale)  # rounded to 8 significant bits, ties to even (round() is): exactly bf16
    return np.float32(math.ldexp(round(mantissa * 256), exponent - 8))


@functools.lru_cache(maxsize=256)
def compiled(dtype, q_shape, k_shape, v_shape, mask, scale, causal, precision):
    """A CompiledModel of one ScaledDotProductAttention. mask: None, or (its kind 'bool' or the
    format's, its shape); scale: None or the float the Constant holds (already in the format)."""
    element = ELEMENT[dtype]
    params = [opset.parameter(list(shape), element, name=name)
              for name, shape in (("query", q_shape), ("key", k_shape), ("value", v_shape))]
    mask_param = None
    if mask is not None:
        kind, shape = mask
        mask_param = opset.parameter(list(shape), ov.Type.boolean if kind == "bool" else element, name="attention_mask")
        params.append(mask_param)
    scale_node = None if scale is None else opset.constant(np.float32(scale), dtype=element)
    node = opset.scaled_dot_product_attention(params[0], params[1], params[2], attention_mask=mask_param,
                                              scale=scale_node, causal=causal)
    model = ov.Model([node], params, "attention")
    config = {"INFERENCE_PRECISION_HINT": "f32"} if precision == "f32" else {}
    return _CORE.compile_model(model, "CPU", config)


def _to_ov(dtype, array):
    """A tensor of the format: bf16 values (float32 holding bf16) become an ov.Tensor of bf16 bits."""
    if dtype == "bf16":
        bits = (np.asarray(array, np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact: bf16 values
        return ov.Tensor(bits, list(bits.shape), ov.Type.bf16)
    return np.ascontiguousarray(array, {"f32": np.float32, "f16": np.float16}[dtype])


def translate(p):
    """The operator's inputs for problem p: (feeds, mask key, scale, causal)."""
    if p.dtype not in ELEMENT:
        raise ValueError(f"format {p.dtype} is not claimed")
    if p.H_kv != p.H or p.window is not None or p.softcap is not None or p.want_lse or p.backward:
        raise ValueError("grouped KV heads, a window, a soft-cap, lse or backward is not claimed")
    scale = None if p.scale is None else float(scale_constant_value(p.dtype, p.scale))
    other_masks = p.allow is not None or p.kv_lens is not None or p.bias is not None
    causal_rule = None  # the causal rule that goes into the mask: None, or the offset d of j <= i + d
    causal = False
    if p.causal == "upper-left" or (p.causal == "lower-right" and p.Tq == p.Tk):
        if other_masks:
            causal_rule = 0
        else:
            causal = True
    elif p.causal == "lower-right":
        causal_rule = p.Tk - p.Tq

    # The boolean part of the attention_mask: the allow mask, key lengths, a causal rule.
    allowed = None
    i = np.arange(p.Tq)[:, None]
    j = np.arange(p.Tk)[None, :]
    if p.allow is not None:
        allowed = p.allow.copy()
    if p.kv_lens is not None:
        within = np.broadcast_to(j[None] < p.kv_lens[:, None, None], (p.B, p.Tq, p.Tk))
        allowed = within.copy() if allowed is None else allowed & within
    if causal_rule is not None:
        below = np.broadcast_to(j <= i + causal_rule, (p.B, p.Tq, p.Tk))
        allowed = below.copy() if allowed is None else allowed & below

    feeds = {"query": _to_ov(p.dtype, p.q), "key": _to_ov(p.dtype, p.k), "value": _to_ov(p.dtype, p.v)}
    mask = None
    if p.bias is not None:
        bias = np.asarray(p.bias, np.float32)  # [B,H,Tq,Tk], values of the format
        if allowed is not None:
            bias = np.where(allowed[:, None], bias, np.float32(-np.inf))
        feeds["attention_mask"] = _to_ov(p.dtype, bias)
        mask = (p.dtype, tuple(bias.shape))
    elif allowed is not None:
        feeds["attention_mask"] = np.ascontiguousarray(allowed[:, None])  # [B,1,Tq,Tk], broadcast over heads
        mask = ("bool", feeds["attention_mask"].shape)
    return feeds, mask, scale, causal


PRECISION = "f32"


def forward(p, precision=None):
    feeds, mask, scale, causal = translate(p)
    model = compiled(p.dtype, p.q.shape, p.k.shape, p.v.shape, mask, scale, causal, precision or PRECISION)
    results = model([feeds[name] for name in ("query", "key", "value", "attention_mask") if name in feeds])
    out = results[model.output(0)]
    if p.dtype == "bf16":  # the bf16 bits (NumPy has no bf16: OpenVINO shows them as float16)
        return (np.ascontiguousarray(out).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    expected = {"f32": np.float32, "f16": np.float16}[p.dtype]
    if out.dtype != expected:
        raise TypeError(f"ScaledDotProductAttention returned {out.dtype} for a {p.dtype} problem")
    return out


def runtime_precision(dtype, precision):
    """(INFERENCE_PRECISION_HINT of the compiled model, runtimePrecision of the attention node) for
    a small model of the format: what this machine's CPU ran."""
    model = compiled(dtype, (1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 4), ("bool", (1, 1, 2, 3)), None, False, precision)
    node = [op.get_rt_info()["runtimePrecision"].astype(str) for op in model.get_runtime_model().get_ordered_ops()
            if "ScaledDotProductAttention" in op.get_friendly_name() and "runtimePrecision" in op.get_rt_info()
            and op.get_rt_info()["layerType"].astype(str) != "Reorder"]
    hint = model.get_property("INFERENCE_PRECISION_HINT")
    return (hint.to_string() if hasattr(hint, "to_string") else str(hint)), node[0] if node else "?"


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (forward, capabilities), or None when an
    option printed what was asked (--report-precision)."""
    global PRECISION
    parser = argparse.ArgumentParser(prog="python -m attncheck.adapters.openvino", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", choices=("sdpa", "paged"), default="sdpa",
                        help="sdpa: ScaledDotProductAttention (this module); paged: PagedAttentionExtension, "
                             "the paged-KV op (attncheck.adapters.openvino_paged, whose --help says how)")
    parser.add_argument("--precision", choices=PRECISIONS, default="f32",
                        help="f32: INFERENCE_PRECISION_HINT f32 (the default); default: OpenVINO's own hint")
    parser.add_argument("--report-precision", action="store_true",
                        help="print what the compiled model runs in on this machine, for each format, and exit")
    chosen = argparse.ArgumentParser(add_help=False)
    chosen.add_argument("--op", choices=("sdpa", "paged"), default="sdpa")
    op, rest = chosen.parse_known_args(argv)
    if op.op == "paged":  # its own options and --help (it takes no --precision: it runs in f32)
        from . import openvino_paged
        return openvino_paged.setup(rest, prog=f"{parser.prog} --op paged")
    args = parser.parse_args(argv)
    PRECISION = args.precision
    if args.report_precision:
        print(f"openvino {ov.__version__}, CPU {_CORE.get_property('CPU', 'FULL_DEVICE_NAME')}, "
              f"capabilities {_CORE.get_property('CPU', 'OPTIMIZATION_CAPABILITIES')}")
        for dtype in ELEMENT:
            hint, node = runtime_precision(dtype, args.precision)
            print(f"--precision {args.precision}, {dtype} model: INFERENCE_PRECISION_HINT {hint}, "
                  f"ScaledDotProductAttention runs in {node}")
        return None
    return dict(forward=forward, capabilities=CAPABILITIES)


def main(argv=None):
    serve("openvino", setup(argv))  # --op paged: the same line names the libraries and versions called


if __name__ == "__main__":
    main()
