"""ONNX Runtime's own ONNX `Attention` operator (opset 23, default domain, CPU execution provider),
as a child of `attncheck check --impl-cmd`.

For each problem it builds a one-node ONNX graph with onnx.helper, runs it with
onnxruntime.InferenceSession and returns the operator's output Y, nothing else: no masking, scaling,
NaN handling or re-computation of its own. Sessions are cached per (format, shapes, attributes,
inputs given), so a campaign is not dominated by session creation (about 1 ms each).

Run it with the pinned environment that ci/lib.sh's ensure_venv makes (ci/requirements.txt:
onnxruntime 1.30.0, onnx 1.21.0, over Debian's numpy):

  build/cli/attncheck check --impl-cmd "$ATTNCHECK_VENV_PYTHON examples/onnxruntime/ort_attention.py"

How each feature of a problem reaches the operator:

  q, k, v     Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] as they are (4-D inputs).
  f32, f16    tensor(float), tensor(float16). Not claimed: f64 and bf16. The schema allows both,
              but ONNX Runtime 1.30's CPU Attention kernel is registered for float and float16
              only; a double graph runs the ONNX function body instead (about 50 primitive nodes),
              which is not this kernel (repro_double_is_not_the_kernel.py shows it).
  gqa         q_num_heads = H, kv_num_heads = H_kv (both attributes set when H != H_kv); the
              operator's groups are contiguous, query head h reads KV head h // (H / H_kv), as
              attncheck's contract says.
  scale       the `scale` attribute, a float32 (the problem's double rounded to float32); absent
              when the problem says default, so the operator uses its own 1/sqrt(head_size).
              ONNX Runtime refuses a scale <= 0 when the session is made ("scale must be greater
              than 0 if specified"); the child does not work around it (negating Q would), so a
              problem with a negative scale is refused, and reported as such.
  softcap     the `softcap` attribute (float32). ONNX Runtime 1.30 applies it before the mask, as
              attncheck's contract does (its source cites onnx PRs 7867 and 7913 for that order;
              onnx 1.21's opset-23 text still draws the mask before the soft-cap).
  causal      upper-left: is_causal = 1 (the spec's alignment when Tq != Tk). Translated:
              lower-right with Tq != Tk, which the operator does not have, becomes part of the
              bool attn_mask (key j allowed when j <= i + Tk - Tq); with Tq == Tk the two coincide
              and is_causal = 1 is used. is_causal is combined with an attn_mask when the problem
              has both (ONNX Runtime and the onnx reference implementation overlay them; opset
              23's text says "only one of which can be provided", opset 24's that is_causal masks
              "regardless of the attn_mask input").
  allow       the bool attn_mask [B,1,Tq,Tk] (true = attend), broadcast over heads.
  kv_lens     Translated: the operator has no key lengths in opset 23 (opset 24's
              nonpad_kv_seqlen is not used), so key j >= kv_lens[b] is false in the bool attn_mask.
  bias        the float attn_mask [B,H,Tq,Tk] (added to the scores, -inf forbids). Translated:
              with an allow mask, key lengths or a lower-right causal mask as well, the one
              attn_mask is float: the bias where allowed, -inf where not.
  not claimed window (no such attribute), lse (the operator returns none; qk_matmul_output mode 3
              gives the weights, not the log-sum-exp), backward (an inference runtime).
"""
import argparse
import functools
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
import attncheck

CAPABILITIES = {"f32", "f16", "allow", "causal", "kv_lens", "gqa", "softcap", "bias"}
OPSET = 23
FORMATS = {"f32": np.float32, "f16": np.float16}


@functools.lru_cache(maxsize=512)
def session(dtype, q_shape, k_shape, v_shape, mask, attributes):
    """An InferenceSession of one Attention node. mask: None, or (its element type 'bool' or the
    format's, its shape); attributes: sorted (name, value) pairs."""
    element = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16}[dtype]
    inputs = [helper.make_tensor_value_info(name, element, list(shape))
              for name, shape in (("Q", q_shape), ("K", k_shape), ("V", v_shape))]
    if mask is not None:
        kind, shape = mask
        inputs.append(helper.make_tensor_value_info("attn_mask", TensorProto.BOOL if kind == "bool" else element,
                                                    list(shape)))
    y_shape = [q_shape[0], q_shape[1], q_shape[2], v_shape[3]]
    node = helper.make_node("Attention", [i.name for i in inputs], ["Y"], **dict(attributes))
    graph = helper.make_graph([node], "attention", inputs, [helper.make_tensor_value_info("Y", element, y_shape)])
    opset = [helper.make_opsetid("", OPSET)]
    model = helper.make_model(graph, opset_imports=opset, ir_version=helper.find_min_ir_version_for(opset))
    onnx.checker.check_model(model)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # fatal only: a refused model is raised (its message shown with the finding), not logged too
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def translate(p):
    """The operator's inputs and attributes for problem p: (feeds, mask key, attributes)."""
    if p.dtype not in FORMATS:
        raise ValueError(f"format {p.dtype} is not claimed")
    if p.window is not None or p.want_lse or p.backward:
        raise ValueError("a window, lse or backward is not claimed")
    attributes = {}
    if p.scale is not None:
        attributes["scale"] = float(p.scale)  # onnx.helper stores a float attribute as float32
    if p.softcap is not None:
        attributes["softcap"] = float(p.softcap)
    if p.H != p.H_kv:
        attributes["q_num_heads"], attributes["kv_num_heads"] = p.H, p.H_kv
    lower_right_as_mask = p.causal == "lower-right" and p.Tq != p.Tk
    if p.causal == "upper-left" or (p.causal == "lower-right" and not lower_right_as_mask):
        attributes["is_causal"] = 1

    # The bool part of the attn_mask: the allow mask, key lengths, a lower-right causal mask.
    allowed = None
    i = np.arange(p.Tq)[:, None]
    j = np.arange(p.Tk)[None, :]
    if p.allow is not None:
        allowed = p.allow.copy()
    if p.kv_lens is not None:
        within = np.broadcast_to(j[None] < p.kv_lens[:, None, None], (p.B, p.Tq, p.Tk))
        allowed = within.copy() if allowed is None else allowed & within
    if lower_right_as_mask:
        below = np.broadcast_to(j <= i + p.Tk - p.Tq, (p.B, p.Tq, p.Tk))
        allowed = below.copy() if allowed is None else allowed & below

    feeds = {"Q": p.q, "K": p.k, "V": p.v}
    mask = None
    if p.bias is not None:
        bias = np.asarray(p.bias, FORMATS[p.dtype])  # [B,H,Tq,Tk]
        if allowed is not None:
            bias = np.where(allowed[:, None], bias, FORMATS[p.dtype](-np.inf))
        feeds["attn_mask"] = np.ascontiguousarray(bias)
        mask = (p.dtype, bias.shape)
    elif allowed is not None:
        feeds["attn_mask"] = np.ascontiguousarray(allowed[:, None])  # [B,1,Tq,Tk], broadcast over heads
        mask = ("bool", feeds["attn_mask"].shape)
    return feeds, mask, tuple(sorted(attributes.items()))


def forward(p):
    feeds, mask, attributes = translate(p)
    run = session(p.dtype, p.q.shape, p.k.shape, p.v.shape, mask, attributes)
    (out,) = run.run(["Y"], feeds)
    if out.dtype != FORMATS[p.dtype]:
        raise TypeError(f"Attention returned {out.dtype} for a {p.dtype} problem")
    return out


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    attncheck.serve(forward, capabilities=CAPABILITIES)


if __name__ == "__main__":
    main()
