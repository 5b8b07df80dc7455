"""ONNX Runtime's com.microsoft `Attention` contrib operator (CPU execution provider) as a layer
(capability mha) for `attncheck check --impl-cmd`.

The operator is BERT's and GPT-2's whole self-attention but the out-projection: it projects its
one input with packed Q/K/V weights and bias, attends per head and returns the heads concatenated.
For each layer call the adapter builds a graph of that node followed by a MatMul with w_o (and an
Add of b_o when the problem has it), runs it with onnxruntime.InferenceSession and returns its
output: no masking, scaling, NaN handling or re-computation of its own. Sessions are cached per
(shapes, attributes, inputs given). Run it with the pinned environment (ci/lib.sh's ensure_venv:
onnxruntime 1.32.0, onnx 1.23.2):

  PYTHONPATH=python build/cli/attncheck check --impl-cmd "$ATTNCHECK_VENV_PYTHON -m attncheck.adapters.onnxruntime_attention"

How each part of a layer call reaches the operator (its schema, onnxruntime 1.30):

  input       x_q [B,S,D] (input_hidden_size D). Self-attention only: the operator has one input,
              and no key or value input of its own; a cross-attention call raises NotExpressible.
  weights     [D, H dk + H dk + H dv] = concat(w_q, w_k, w_v) along the columns (the schema's
              "merged Q/K/V weights ... stacked on the second dimension"); qkv_hidden_sizes =
              (H dk, H dk, H dv) when dv != dk (the schema: "required only when K and V have
              different hidden sizes"), so dk and dv are free, and D need not be H dk. One
              num_heads: H_kv != H raises NotExpressible (gqa is not claimed).
  bias        [H dk + H dk + H dv] = concat(b_q, b_k, b_v), Translated: zeros in place of a
              missing one (the layer's own rule, a missing bias is zero, and the only way to pack
              some of the three). The schema makes the bias optional, but onnxruntime 1.30's CPU
              kernel dies of SIGSEGV without it (onnxruntime issue 25005, open;
              examples/onnxruntime_attention/repro_no_bias_segfault.py), so it is always given.
  out-proj    MatMul(heads [B,S,H dv], w_o [H dv, D]), then Add b_o [D] when the problem has it.
  f32         tensor(float): the CPU kernel is registered for float alone (the schema also allows
              float16 and bfloat16). Not claimed: f64, f16, bf16.
  causal      unidirectional = 1: with Tq == Tk (self-attention) upper-left and lower-right are
              the same mask.
  kv_lens     mask_index int32 [B], "actual sequence length excluding padding" (right padding).
  allow, window
              mask_index int32 [B,S,S], the raw 3-D mask, 1 = attend; Translated: a window (which
              the operator has no attribute for) and, with either, the key lengths are folded into
              the one raw mask (key j allowed when the allow mask, the window and j < kv_lens[b]
              all allow it). With causal as well, unidirectional = 1 is set beside it.
  scale       the `scale` attribute (float32); absent for the default, 1/sqrt(head_size). A scale
              that rounds to 0 in float32 raises NotExpressible (0 reads as the default).
  not claimed mha_weights (the operator returns no attention probabilities), gqa, softcap.

masked keys: the operator adds mask_filter_value, default -10000 (the schema: "The value to be
filled in the attention mask. Default value is -10000.0f"), to a key the raw mask or the key
lengths forbid, not -inf, and the adapter leaves it at its default. So a row whose every key is
forbidden gets every score shifted by -10000 alike, and its softmax is the unmasked row's: out is
the layer without the mask (not b_o), up to the float32 rounding of score - 10000; and a
forbidden key whose score passes the permitted ones' by 10000 takes the weight
(examples/onnxruntime_attention/repro_soft_mask_minus_10000.py). The causal mask is not soft
(since onnxruntime PR 16369, for issue 14363): a future key gets no weight, so a row whose only
causally permitted keys are all padding puts its weight on that padding, and the output row is
theirs (examples/onnxruntime_attention/repro_issue_14363_causal_and_padding.py).
"""
import argparse
import functools

import numpy as np

from . import NotExpressible, library, serve

ort = library("onnxruntime", "onnxruntime_attention", since="1.16")  # the oldest checked: 1.16.3
onnx = library("onnx", "onnxruntime_attention")
from onnx import TensorProto, helper  # noqa: E402

CAPABILITIES = {"f32", "allow", "causal", "kv_lens", "window", "mha"}
ELEMENTS = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}


@functools.lru_cache(maxsize=256)
def session(inputs, attributes, with_b_o, y_shape):
    """An InferenceSession of Attention -> MatMul(w_o) [-> Add(b_o)]. inputs: the Attention node's
    (name, numpy dtype string, shape), name "" for an input left out; attributes: sorted (name,
    value) pairs, a list as a tuple; w_o and b_o are the graph's further inputs."""
    names = [name for name, _, _ in inputs]
    while names and not names[-1]:
        names.pop()
    values = [helper.make_tensor_value_info(name, ELEMENTS[np.dtype(kind)], list(shape))
              for name, kind, shape in inputs if name]
    D = y_shape[-1]
    nodes = [helper.make_node("Attention", names, ["heads"], domain="com.microsoft",
                              **{k: list(v) if isinstance(v, tuple) else v for k, v in attributes})]
    values.append(helper.make_tensor_value_info("w_o", TensorProto.FLOAT, None))
    nodes.append(helper.make_node("MatMul", ["heads", "w_o"], ["projected" if with_b_o else "out"]))
    if with_b_o:
        values.append(helper.make_tensor_value_info("b_o", TensorProto.FLOAT, [D]))
        nodes.append(helper.make_node("Add", ["projected", "b_o"], ["out"]))
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, list(y_shape))
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(helper.make_graph(nodes, "layer", values, [out]), opset_imports=opsets, ir_version=8)
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: a refused model is raised, not logged too
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _raw_mask(m):
    """The raw 3-D mask_index [B,S,S] (int32, 1 = attend), or None: the allow mask, the window and,
    with either, the key lengths."""
    if m.allow is None and m.window is None:
        return None
    S = m.Tq
    i = np.arange(S)[:, None]
    j = np.arange(S)[None, :]
    permitted = np.ones((m.B, S, S), bool)
    if m.allow is not None:
        permitted &= m.allow
    if m.window is not None:
        left, right = m.window
        if left >= 0:
            permitted &= j >= i - left
        if right >= 0:
            permitted &= j <= i + right
    if m.kv_lens is not None:
        permitted &= j[None] < m.kv_lens[:, None, None]
    return np.ascontiguousarray(permitted.astype(np.int32))


def translate(m):
    """The Attention node's feeds (input, weights, bias, mask_index; None for one left out) and
    attributes, for the Layer m."""
    if m.dtype != "f32":
        raise ValueError(f"format {m.dtype} is not claimed (the CPU kernel is float's alone)")
    if m.want_weights:
        raise ValueError("mha_weights is not claimed: the operator returns no attention probabilities")
    if not m.self_attention:
        raise NotExpressible("cross-attention: com.microsoft Attention projects its one input to Q, K and V "
                             "(self-attention; it has no key or value input)")
    if m.H_kv != m.H:
        raise NotExpressible(f"H_kv != H: com.microsoft Attention has one num_heads (H_kv {m.H_kv}, H {m.H})")
    zeros = lambda n: np.zeros(n, np.float32)
    bias = np.concatenate([zeros(m.H * m.dk) if m.b_q is None else m.b_q,
                           zeros(m.H * m.dk) if m.b_k is None else m.b_k,
                           zeros(m.H * m.dv) if m.b_v is None else m.b_v]).astype(np.float32)
    weights = np.ascontiguousarray(np.concatenate([m.w_q, m.w_k, m.w_v], axis=1), np.float32)
    attributes = {"num_heads": m.H}
    if m.dv != m.dk:
        attributes["qkv_hidden_sizes"] = [m.H * m.dk, m.H * m.dk, m.H * m.dv]
    if m.causal != "none":
        attributes["unidirectional"] = 1  # Tq == Tk: upper-left and lower-right coincide
    if m.scale is not None:
        if np.float32(m.scale) == 0:
            raise NotExpressible(f"a scale that rounds to 0 in float32: the operator reads 0 as its default (scale {m.scale!r})")
        attributes["scale"] = float(m.scale)
    mask = _raw_mask(m)
    if mask is None and m.kv_lens is not None:
        mask = np.asarray(m.kv_lens, np.int32)  # [B]: each sequence's length, right padding
    feeds = {"input": np.ascontiguousarray(m.x_q, np.float32), "weights": weights, "bias": bias, "mask_index": mask}
    return feeds, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attributes.items()))


def layer(m):
    feeds, attributes = translate(m)
    inputs = tuple((name if x is not None else "", "" if x is None else x.dtype.str, () if x is None else x.shape)
                   for name, x in feeds.items())
    run = session(inputs, attributes, m.b_o is not None, (m.B, m.Tq, m.D))
    given = {name: x for name, x in feeds.items() if x is not None}
    given["w_o"] = np.ascontiguousarray(m.w_o, np.float32)
    if m.b_o is not None:
        given["b_o"] = np.ascontiguousarray(m.b_o, np.float32)
    (out,) = run.run(["out"], given)
    if out.dtype != np.float32:
        raise TypeError(f"the graph returned {out.dtype} for a f32 layer")
    return out


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (layer, capabilities)."""
    parser = argparse.ArgumentParser(prog="python -m attncheck.adapters.onnxruntime_attention", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    return dict(layer=layer, capabilities=CAPABILITIES, restrictions=["self_attention"])


def main(argv=None):
    serve("onnxruntime_attention", setup(argv))


if __name__ == "__main__":
    main()
