"""ONNX Runtime's attention operators (CPU execution provider) as a child of `attncheck check --impl-cmd`:

  --op attention  the ONNX `Attention` operator (default domain, --opset 23 or 24; the default)
  --op gqa        com.microsoft `GroupQueryAttention` (contrib, version 1)
  --op mha        com.microsoft `MultiHeadAttention` (contrib, version 1)

For each problem it builds a one-node ONNX graph with onnx.helper, runs it with
onnxruntime.InferenceSession and returns the operator's output, nothing else: no masking, scaling,
NaN handling or re-computation of its own. Sessions are cached per (operator, format, shapes,
attributes, inputs given), so a campaign is not dominated by session creation (about 1 ms each).
Run it with the pinned environment that ci/lib.sh's ensure_venv makes (ci/requirements.txt:
onnxruntime 1.32.0, onnx 1.23.2):

  PYTHONPATH=python build/cli/attncheck check --impl-cmd "$ATTNCHECK_VENV_PYTHON -m attncheck.adapters.onnxruntime --op gqa"

Releases: onnxruntime 1.16 and later (LOADS below: each contrib node is stamped with the highest
opset and IR version the installed release loads). --op attention needs 1.23 (opset 23; 1.22.1 loads
opset 22 at most), --opset 24 1.24; --op gqa a CPU kernel of GroupQueryAttention (1.18.1 has one,
1.17.3 none). What a release's schema of the operator lacks is not claimed: GroupQueryAttention's
softcap (1.20.1, not 1.19.2), attention_bias (1.22.1, not 1.21.1), head_sink (1.23.0, not 1.22.1)
and `causal` attribute (1.30.0, not 1.29.0: before it every call is causal, declared restrictions
causal and lower_right, so no KV-end call is drawn there), MultiHeadAttention's unidirectional
(1.17.3, not 1.16.3) and attention_bias (1.20.1). Each refusal is one line on stderr and exit 2.

Each operator says what it takes of its claims (RESTRICTIONS, none on a current release), and
attncheck sends nothing else; a problem inside them that the operator cannot be given
(GroupQueryAttention's Tq > Tk, say) raises NotExpressible, naming what it lacks, and is counted as
not taken.

--op attention: how each feature of a problem reaches the ONNX Attention operator

  q, k, v     Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] as they are (4-D inputs).
  f32, f16    tensor(float), tensor(float16). Not claimed: f64 and bf16. The schema allows both,
              but ONNX Runtime 1.30's CPU Attention kernel is registered for float and float16
              only; a double graph runs the ONNX function body instead (about 50 primitive nodes),
              which is not this kernel (examples/onnxruntime/repro_double_is_not_the_kernel.py).
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
  causal      is_causal = 1 where its diagonal is the problem's: query i sees key j <= i + offset,
              offset 0, or with nonpad_kv_seqlen (--opset 24) nonpad_kv_seqlen[b] - Tq per batch
              (the opset-24 text since onnx 1.23, "bottom-right (offset-aware)"; ONNX Runtime 1.30
              and 1.32 and the onnx 1.23 reference implementation compute it so; onnx 1.21's text
              said "upper left" for is_causal alone). So upper-left is is_causal = 1 without key
              lengths (or with every length Tq), lower-right with Tq == Tk likewise (or with every
              length Tk), and KV-end causal (j <= i + kv_lens[b] - Tq, kv_cache) is is_causal = 1
              with nonpad_kv_seqlen = kv_lens under --opset 24: the operator's own. Translated: any
              other causal mask (KV-end under --opset 23 among them) becomes part of the bool
              attn_mask (key j allowed when j <= i, j <= i + Tk - Tq or j <= i + kv_lens[b] - Tq). is_causal is combined with an attn_mask when the problem
              has both (ONNX Runtime and the onnx reference implementation overlay them; opset
              23's text says "only one of which can be provided", opset 24's that is_causal masks
              "regardless of the attn_mask input").
  allow       the bool attn_mask [B,1,Tq,Tk] (true = attend), broadcast over heads.
  kv_lens     --opset 24: the operator's own nonpad_kv_seqlen (int64 [B]). --opset 23 has no key
              lengths, so there they are translated: key j >= kv_lens[b] is false in the bool
              attn_mask.
  bias        the float attn_mask [B,H,Tq,Tk] (added to the scores, -inf forbids). Translated:
              with an allow mask, a lower-right causal mask (or, under --opset 23, key lengths)
              as well, the one attn_mask is float: the bias where allowed, -inf where not.
  not claimed window and sinks (no such attribute or input in opsets 23 and 24), lse (the operator
              returns none; qk_matmul_output mode 3 gives the weights, not the log-sum-exp),
              backward (an inference runtime).

--op gqa: com.microsoft GroupQueryAttention, its KV-cache (decoding) form

  q, k, v     Translated layout: the operator takes packed [B,T,heads*head_size] inputs, so
              Q becomes [B,Tq,H*d], and K, V are split as a KV cache of one sequence per batch:
              batch b's sequence is keys 0 .. L_b - 1 (L_b below), its last Tq keys the new key
              and value ([B,Tq,H_kv*d], batch b's keys L_b - Tq .. L_b - 1), the keys before them
              past_key / past_value (BNSH, [B,H_kv,Tk-Tq,d]: the problem's keys 0 .. Tk - Tq - 1,
              of which the kernel reads batch b's first L_b - Tq); seqlens_k = L_b - 1 (int32 [B])
              and total_sequence_length = Tk, so present = past ++ new and key j of the problem is
              key j of the operator. When every L_b is Tq (upper-left with Tq < Tk, or Tq = Tk),
              total_sequence_length = Tq and there is no past (the operator's first prompt; the
              keys Tq .. Tk - 1 are no query's, and the bias's columns for them are not sent).
  lengths     L_b, from the problem's own mask (p.mask(): key lengths, causal, window): without
              a causal mask kv_lens[b] (Tk without key lengths); with one, 1 + the last key the
              last query sees, where the operator puts that query's diagonal (gqa_attention_base.h:
              past = seqlens_k[b] + 1 - Tq, query i sees keys j <= past + i, none at or past
              seqlens_k[b] + 1). The operator's mask so made (causal, local_window_size, seqlens_k)
              must be the problem's, row for row, or the problem is raised (NotExpressible): so
              KV-end causal (kv_lens[b] = L_b: j <= i + kv_lens[b] - Tq) is sent as it is, upper-left
              as sequences of Tq keys, lower-right with key lengths only where each query's
              diagonal is at its sequence's end (Tq 1: a decode step), and a window only where it
              is anchored there too. Raised as well: a sequence shorter than Tq (kv_lens[b] < Tq:
              the operator's new keys are as many as its queries, so no padded batch whose new
              tokens are not the last Tq keys of each sequence), and B > 1 with 1 < Tq < Tk and a
              past (group_query_attention_helper.h: "batch_size must be 1 when sequence_length > 1
              and past context is given"). Keys at or past kv_lens[b] are never given as new keys;
              the past buffer holds them where they are before Tk - Tq, the kernel does not read
              them.
  head size   Translated: the CPU kernel takes one head_size for Q, K and V and only multiples of
              8 ("head_size must be a multiple of 8"), so dk and dv are zero-padded to
              d = the next multiple of 8 of max(dk, dv): q.k is unchanged (the added terms are
              0 * 0), the padded output columns are 0 * weights and are dropped. When dk is padded
              and the scale is the default, the `scale` attribute is set to 1/sqrt(dk) (float32),
              since the operator's default would use the padded width.
  f32, f16    tensor(float), tensor(float16) (the CPU kernel's two). Not claimed: f64, bf16.
  gqa         num_heads = H, kv_num_heads = H_kv; the operator's query head h reads KV head
              h / (H / H_kv) (contiguous groups), as attncheck's contract says.
  causal      `causal` = 1 (the default): key j <= past + i, the diagonal at each sequence's end
              (see lengths): KV-end causal, lower-right (Tk - Tq when L_b = Tk), upper-left (L_b =
              Tq). causal none: `causal` = 0 (ONNX Runtime 1.30's bidirectional mode), each query
              sees its sequence's L_b keys.
  kv_lens     seqlens_k = kv_lens - 1 (see lengths). A key length of 0 is no sequence the operator
              takes (it has Tq new keys), so EmptyRowsFollowThePolicy, which makes its empty rows
              with one, is never taken.
  window      local_window_size, which since onnxruntime PR 25927 counts the current token: w
              means keys past + i - w + 1 .. past + i, so attncheck's window (left, right) with
              lower-right causal is local_window_size = left + 1 (-1 when left is unbounded); the
              right side is within the causal mask. Translated: a window (left, 0) without causal
              is exactly causal = 1 with that local_window_size. A window whose right side is
              not 0 without a causal mask cannot be expressed (the CPU kernel refuses a
              local_window_size with causal = 0): raised.
  scale       the `scale` attribute (float32; 0, the operator's "default", is never sent: a scale
              that rounds to 0 in float32 is raised).
  softcap     the `softcap` attribute; the CPU kernel caps the scaled product before adding
              attention_bias, as attncheck's contract does.
  bias        attention_bias [B,H,Tq,Tk], added to the scores (-inf forbids).
  sinks       head_sink [H] (input 11, "each head has a smooth factor adding to the denominator of
              softmax"), of the problem's format: the float32 sinks as they are for f32, rounded to
              float16 for f16 (every sink attncheck draws is a float16 value). The CPU kernel adds
              exp(head_sink[h] - m) to the denominator of the scaled, soft-capped, biased scores,
              the sink itself unscaled, as attncheck's contract does. Not sent: smooth_softmax
              (the same as a sink of 0 for every head, which test_onnxruntime.py shows the
              operator computing so; head_sink, when given, takes its place).
              A row with no finite score and a sink of -inf gives NaN in 1.32.0 where the same
              call without head_sink gives 0 (causal = 1; exp(-inf - -inf)), a finding
              (examples/onnxruntime/repro_gqa_sink_minus_inf_empty_row_nan.py).
  not claimed allow (the operator has no mask input), lse, backward.

--op mha: com.microsoft MultiHeadAttention, separate Q, K, V with no projection bias

  q, k, v     Translated layout: query [B,Tq,H*dk], key [B,Tk,H*dk], value [B,Tk,H*dv] (the
              operator's 3-D BSD inputs; head h is columns h*d .. h*d + d - 1).
  f32, f16    tensor(float), tensor(float16). Not claimed: f64, bf16.
  scale       the `scale` attribute (float32; 0 means the default to the operator, so a scale that
              rounds to 0 is raised).
  allow       key_padding_mask int32 [B,Tq,Tk] (1 = attend), one of the operator's mask shapes.
  kv_lens     key_padding_mask int32 [B] (each key sequence's length, right padding); with an allow
              mask or a lower-right causal mask as well, translated into the one [B,Tq,Tk] mask.
  causal      `unidirectional` = 1 for upper-left, and for lower-right when Tq == Tk (the same
              mask). Translated: lower-right with Tq != Tk becomes part of the [B,Tq,Tk]
              key_padding_mask.
  bias        attention_bias [B,H,Tq,Tk], added to the scores.
  masked keys get the operator's own mask_filter_value, left at its default -10000: a finite
              value added to a masked key's score, not -inf, so a row whose every key is masked
              gives the mean of V and a score above 10000 defeats the mask. This is the
              operator's documented behaviour; the strict contract reports it.
  not claimed gqa (one num_heads for all three), softcap, window and sinks (none), lse, backward.
"""
import argparse
import functools
import math

import numpy as np

from . import NotExpressible, library, refuse, serve, version

ort = library("onnxruntime", "onnxruntime", since="1.16")  # the oldest release in LOADS
onnx = library("onnx", "onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

# The highest ONNX opset and IR version each onnxruntime release loads, measured on the last patch
# release of each, 1.16.3 to 1.32.0 (a one-node model of each stamp given to InferenceSession;
# test_onnxruntime.py checks the installed release's row). A later release takes the last row, which
# it loads too.
LOADS = {(1, 16): (19, 9), (1, 17): (20, 9), (1, 18): (21, 10), (1, 19): (21, 10), (1, 20): (21, 10),
         (1, 21): (22, 10), (1, 22): (22, 10), (1, 23): (23, 11), (1, 24): (25, 13), (1, 25): (26, 13),
         (1, 26): (26, 13), (1, 27): (26, 13), (1, 28): (26, 13), (1, 29): (26, 13), (1, 30): (26, 13),
         (1, 31): (26, 13), (1, 32): (28, 14)}

CAPABILITIES = {
    "attention": {"f32", "f16", "allow", "causal", "kv_lens", "kv_cache", "gqa", "softcap", "bias"},
    "gqa": {"f32", "f16", "causal", "kv_lens", "kv_cache", "gqa", "window", "softcap", "bias", "sinks"},
    "mha": {"f32", "f16", "allow", "causal", "kv_lens", "bias"},
}
# What each operator takes of what it claims (attncheck features lists the restrictions).
RESTRICTIONS = {"attention": [], "gqa": [], "mha": []}
OPSETS = (23, 24)
FORMATS = {"f32": np.float32, "f16": np.float16}
ELEMENTS = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16}
INDEX_ELEMENTS = {np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
                  np.dtype(bool): TensorProto.BOOL}


def loads(release=None):
    """(opset, IR version): the highest the onnxruntime `release` (the installed one) loads, LOADS' row at or below it."""
    return LOADS[max(row for row in LOADS if row <= version(release or ort.__version__)[:2])]


def contrib_schema(op):
    """(attributes, input names, whether the CPU execution provider has a kernel) of com.microsoft `op`
    in the installed release: the attributes and inputs it takes differ between releases."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C
    schemas = [s for s in C.get_all_operator_schema() if s.name == op and s.domain == "com.microsoft"]
    kernel = any(k.op_name == op and k.domain == "com.microsoft" and k.provider == "CPUExecutionProvider"
                 for k in C.get_all_opkernel_def())
    if not schemas:
        return set(), [], kernel
    return set(schemas[-1].attributes), [i.name for i in schemas[-1].inputs], kernel


def _element(dtype, array_dtype):
    return INDEX_ELEMENTS.get(np.dtype(array_dtype), ELEMENTS[dtype])


@functools.lru_cache(maxsize=512)
def session(op_type, domain, opset, dtype, inputs, outputs, y_shape, attributes):
    """An InferenceSession of one node. inputs: (name, numpy dtype string, shape) in the node's
    input order, name "" for an input left out; outputs: output names, the first one's value (of
    shape y_shape) is what the caller reads; attributes: sorted (name, value) pairs."""
    values = [helper.make_tensor_value_info(name, _element(dtype, kind), list(shape))
              for name, kind, shape in inputs if name]
    names = [name for name, _, _ in inputs]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op_type, names, list(outputs), domain=domain or None, **dict(attributes))
    results = [helper.make_tensor_value_info(name, ELEMENTS[dtype], list(y_shape) if n == 0 else None)
               for n, name in enumerate(outputs)]
    graph = helper.make_graph([node], "attention", values, results)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    # a contrib node: the highest stamp the release loads (LOADS); the ONNX Attention's own opset's IR version
    ir_version = loads()[1] if domain else helper.find_min_ir_version_for(opsets[:1])
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)
    if not domain:
        onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: a refused model is raised (its message shown with the finding), not logged too
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _run(op_type, domain, opset, p, feeds, outputs, y_shape, attributes):
    """Runs the node on feeds (a dict in input order; None for an input left out) and returns its first output."""
    inputs = tuple((name if x is not None else "", "" if x is None else x.dtype.str, () if x is None else x.shape)
                   for name, x in feeds.items())
    run = session(op_type, domain, opset, p.dtype, inputs, tuple(outputs), tuple(y_shape), attributes)
    (out,) = run.run(outputs[:1], {name: x for name, x in feeds.items() if x is not None})
    if out.dtype != FORMATS[p.dtype]:
        raise TypeError(f"{op_type} returned {out.dtype} for a {p.dtype} problem")
    return out


def _check_claimed(p, op, unclaimed):
    if p.dtype not in FORMATS:
        raise ValueError(f"format {p.dtype} is not claimed")
    if p.want_lse or p.backward:
        raise ValueError("lse and backward are not claimed")
    for name in unclaimed:
        if getattr(p, name) is not None:
            raise ValueError(f"--op {op} does not claim {name}")


def _float32_scale(p):
    """The problem's scale as the float32 attribute, None for the default; 0 would mean the default, so raised."""
    if p.scale is None:
        return None
    if np.float32(p.scale) == 0:
        raise NotExpressible(f"a scale that rounds to 0 in float32: the operator reads 0 as its default (scale {p.scale!r})")
    return float(p.scale)


def _causal(p, offset):
    """[B,Tq,Tk]: query i may see key j <= i + offset (a number, or one per batch)."""
    i = np.arange(p.Tq)[None, :, None]
    j = np.arange(p.Tk)[None, None, :]
    return np.broadcast_to(j <= i + np.reshape(offset, (-1, 1, 1)), (p.B, p.Tq, p.Tk))


def _key_lengths(p):
    j = np.arange(p.Tk)[None, None, :]
    return np.broadcast_to(j < p.kv_lens[:, None, None], (p.B, p.Tq, p.Tk))


# --op attention -----------------------------------------------------------------------------------

def translate(p, opset=23):
    """The ONNX Attention operator's inputs and attributes for problem p: (feeds, attributes); feeds
    in the operator's input order (Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen),
    None for an input left out, trailing ones dropped."""
    _check_claimed(p, "attention", ("window", "sinks"))
    attributes = {}
    if p.scale is not None:
        attributes["scale"] = float(p.scale)  # onnx.helper stores a float attribute as float32
    if p.softcap is not None:
        attributes["softcap"] = float(p.softcap)
    if p.H != p.H_kv:
        attributes["q_num_heads"], attributes["kv_num_heads"] = p.H, p.H_kv
    lengths_as_input = opset >= 24
    # is_causal's diagonal: query i sees key j <= i + offset, offset 0 without key lengths and
    # nonpad_kv_seqlen[b] - Tq with them (opset 24's text since onnx 1.23: "bottom-right
    # (offset-aware)"). The problem's causal mask is is_causal where the diagonals coincide.
    offset = p.kv_lens - p.Tq if p.kv_lens is not None and lengths_as_input else np.zeros(1)
    diagonal = {"upper-left": 0, "lower-right": p.Tk - p.Tq,
                "kv-end": (p.Tk if p.kv_lens is None else p.kv_lens) - p.Tq}.get(p.causal)
    if diagonal is not None and np.all(offset == diagonal):
        attributes["is_causal"] = 1
    causal_as_mask = diagonal is not None and "is_causal" not in attributes

    # The bool part of the attn_mask: the allow mask, key lengths (opset 23), a causal mask is_causal
    # cannot give.
    allowed = None
    for part in (p.allow,
                 _key_lengths(p) if p.kv_lens is not None and not lengths_as_input else None,
                 _causal(p, diagonal) if causal_as_mask else None):
        if part is not None:
            allowed = part.copy() if allowed is None else allowed & part

    feeds = {"Q": p.q, "K": p.k, "V": p.v, "attn_mask": None, "past_key": None, "past_value": None,
             "nonpad_kv_seqlen": None}
    if p.bias is not None:
        bias = np.asarray(p.bias, FORMATS[p.dtype])  # [B,H,Tq,Tk]
        if allowed is not None:
            bias = np.where(allowed[:, None], bias, FORMATS[p.dtype](-np.inf))
        feeds["attn_mask"] = np.ascontiguousarray(bias)
    elif allowed is not None:
        feeds["attn_mask"] = np.ascontiguousarray(allowed[:, None])  # [B,1,Tq,Tk], broadcast over heads
    if p.kv_lens is not None and lengths_as_input:
        feeds["nonpad_kv_seqlen"] = np.asarray(p.kv_lens, np.int64)
    while feeds and next(reversed(feeds.values())) is None:
        feeds.popitem()
    return feeds, tuple(sorted(attributes.items()))


def forward(p, opset=23):
    feeds, attributes = translate(p, opset)
    return _run("Attention", "", opset, p, feeds, ("Y",), (p.B, p.H, p.Tq, p.dv), attributes)


# --op gqa -----------------------------------------------------------------------------------------

def _packed(x):
    """[B,N,T,d] as the packed [B,T,N*d]."""
    B, N, T, d = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(B, T, N * d))


def _padded(x, d):
    """The last axis zero-padded to d."""
    if x.shape[-1] == d:
        return x
    return np.concatenate([x, np.zeros(x.shape[:-1] + (d - x.shape[-1],), x.dtype)], axis=-1)


def gqa_mask(lengths, causal, local_window_size, Tq, Tk):
    """bool [B,Tq,Tk]: the keys GroupQueryAttention's CPU kernel lets query i of batch b see, given
    seqlens_k = lengths - 1 (gqa_attention_base.h: past = seqlens_k[b] + 1 - Tq, query i's causal
    length past + i + 1, keys past the batch's total length never read, local_window_size w keeping
    keys past + i - w + 1 .. past + i)."""
    lengths = np.reshape(lengths, (-1, 1, 1))
    i = np.arange(Tq)[None, :, None]
    j = np.arange(Tk)[None, None, :]
    seen = j < lengths
    if causal:
        diagonal = lengths - Tq + i
        seen = seen & (j <= diagonal)
        if local_window_size > 0:
            seen = seen & (j > diagonal - local_window_size)
    return np.broadcast_to(seen, (lengths.shape[0], Tq, Tk))


def translate_gqa(p):
    """GroupQueryAttention's inputs and attributes: (feeds, attributes, d), d the padded head size."""
    _check_claimed(p, "gqa", ("allow",))  # sinks: claimed where the schema has head_sink
    if p.Tq > p.Tk:
        raise NotExpressible(f"Tq > Tk: GroupQueryAttention's new keys are as many as its queries, after a past of "
                             f"Tk - Tq keys (Tq {p.Tq}, Tk {p.Tk})")
    causal = p.causal != "none"
    local_window_size = -1
    if p.window is not None:
        left, right = p.window
        if not causal:
            if right != 0:
                raise NotExpressible(f"a window without a causal mask: GroupQueryAttention's local_window_size needs "
                                     f"causal = 1, which bounds the right side at 0 (window ({left}, {right}))")
            causal = True  # the window (left, 0) is the lower-right causal mask with a left bound
        local_window_size = left + 1 if left >= 0 else -1  # counts the current token (onnxruntime PR 25927)

    # Each batch's sequence length L_b (seqlens_k = L_b - 1): its keys 0 .. L_b - 1, the last Tq of them the
    # new ones. Without a causal mask, the batch's key length (Tk without); with one, the keys the last
    # query sees end at key L_b - 1 (its diagonal past + Tq - 1). Then the operator's mask must be the
    # problem's, row for row, or the problem cannot be given.
    wanted = p.mask()[:, 0]  # [B,Tq,Tk]: the same for every head
    if causal:
        last = wanted[:, -1]
        lengths = np.where(last.any(-1), p.Tk - np.argmax(last[:, ::-1], -1), 0)
    else:
        lengths = np.full(p.B, p.Tk) if p.kv_lens is None else np.asarray(p.kv_lens, np.int64)
    short = lengths < p.Tq
    if short.any():
        raise NotExpressible(f"a sequence shorter than Tq: GroupQueryAttention's new keys are as many as its queries "
                             f"(batch {int(np.argmax(short))}'s length {int(lengths[short][0])}, Tq {p.Tq}; causal "
                             f"{p.causal}" + ("" if p.kv_lens is None else f", kv_lens {p.kv_lens.tolist()}") + ")")
    if not np.array_equal(gqa_mask(lengths, causal, local_window_size, p.Tq, p.Tk), wanted):
        raise NotExpressible(f"a mask GroupQueryAttention's causal diagonal at each sequence's end cannot give: causal "
                             f"{p.causal}, window {p.window}, Tq {p.Tq}, Tk {p.Tk}"
                             + ("" if p.kv_lens is None else f", kv_lens {p.kv_lens.tolist()}"))

    d = -(-max(p.dk, p.dv) // 8) * 8  # the CPU kernel's head_size: one for Q, K and V, a multiple of 8
    attributes = {"num_heads": p.H, "kv_num_heads": p.H_kv}
    scale = _float32_scale(p)
    if scale is None and d != p.dk:
        scale = 1 / math.sqrt(p.dk)  # the operator's default would be 1/sqrt(d)
    if scale is not None:
        attributes["scale"] = scale
    if p.softcap is not None:
        attributes["softcap"] = float(p.softcap)
    if not causal:
        attributes["causal"] = 0
    if local_window_size != -1:
        attributes["local_window_size"] = local_window_size

    # total_sequence_length: Tk, with a past buffer of keys 0 .. Tk - Tq - 1 (batch b's past its first
    # L_b - Tq); or, when every sequence is its Tq new keys, Tq with no past (the operator's first prompt:
    # keys Tq .. Tk - 1 are no sequence's, and the bias's columns for them are not given).
    # group_query_attention_helper.h refuses Tq > 1 with a past for B > 1 ("batch_size must be 1 when
    # sequence_length > 1 and past context is given").
    total = p.Tq if np.all(lengths == p.Tq) else p.Tk
    if p.B > 1 and 1 < p.Tq < total:
        raise NotExpressible(f"B > 1 with Tq > 1 and a past: GroupQueryAttention takes several new keys after a past "
                             f"for one batch alone (B {p.B}, Tq {p.Tq}, lengths {lengths.tolist()})")
    past = total - p.Tq
    k, v = _padded(p.k, d), _padded(p.v, d)
    new = [np.arange(n - p.Tq, n) for n in lengths.tolist()]  # each batch's new keys: its last Tq
    new_k = np.stack([k[b][:, keys] for b, keys in enumerate(new)])
    new_v = np.stack([v[b][:, keys] for b, keys in enumerate(new)])
    feeds = {"query": _packed(_padded(p.q, d)), "key": _packed(new_k), "value": _packed(new_v),
             "past_key": np.ascontiguousarray(k[:, :, :past]) if past else None,
             "past_value": np.ascontiguousarray(v[:, :, :past]) if past else None,
             "seqlens_k": np.asarray(lengths - 1, np.int32),
             "total_sequence_length": np.array(total, np.int32),
             "cos_cache": None, "sin_cache": None, "position_ids": None,
             "attention_bias": None if p.bias is None else
             np.ascontiguousarray(np.asarray(p.bias, FORMATS[p.dtype])[..., :total]),
             "head_sink": None if p.sinks is None else np.asarray(p.sinks, FORMATS[p.dtype])}
    while next(reversed(feeds.values())) is None:
        feeds.popitem()
    return feeds, tuple(sorted(attributes.items())), d


def forward_gqa(p):
    feeds, attributes, d = translate_gqa(p)
    out = _run("GroupQueryAttention", "com.microsoft", loads()[0], p, feeds, ("output", "present_key", "present_value"),
               (p.B, p.Tq, p.H * d), attributes)
    return out.reshape(p.B, p.Tq, p.H, d).transpose(0, 2, 1, 3)[..., :p.dv]


# --op mha -----------------------------------------------------------------------------------------

def translate_mha(p):
    """MultiHeadAttention's inputs and attributes: (feeds, attributes)."""
    _check_claimed(p, "mha", ("window", "softcap", "sinks"))
    if p.H != p.H_kv:
        raise ValueError("--op mha does not claim gqa")
    attributes = {"num_heads": p.H}
    scale = _float32_scale(p)
    if scale is not None:
        attributes["scale"] = scale
    lower_right_as_mask = p.causal == "lower-right" and p.Tq != p.Tk
    if p.causal == "upper-left" or (p.causal == "lower-right" and not lower_right_as_mask):
        attributes["unidirectional"] = 1
    mask = None
    if p.kv_lens is not None and p.allow is None and not lower_right_as_mask:
        mask = np.asarray(p.kv_lens, np.int32)  # [B]: each key sequence's length
    else:
        allowed = None
        for part in (p.allow, _key_lengths(p) if p.kv_lens is not None else None,
                     _causal(p, p.Tk - p.Tq) if lower_right_as_mask else None):
            if part is not None:
                allowed = part.copy() if allowed is None else allowed & part
        if allowed is not None:
            mask = np.ascontiguousarray(allowed.astype(np.int32))  # [B,Tq,Tk], 1 = attend
    feeds = {"query": _packed(p.q), "key": _packed(p.k), "value": _packed(p.v), "bias": None,
             "key_padding_mask": mask,
             "attention_bias": None if p.bias is None else np.ascontiguousarray(np.asarray(p.bias, FORMATS[p.dtype]))}
    while next(reversed(feeds.values())) is None:
        feeds.popitem()
    return feeds, tuple(sorted(attributes.items()))


def forward_mha(p):
    feeds, attributes = translate_mha(p)
    out = _run("MultiHeadAttention", "com.microsoft", loads()[0], p, feeds, ("output",), (p.B, p.Tq, p.H * p.dv), attributes)
    return out.reshape(p.B, p.Tq, p.H, p.dv).transpose(0, 2, 1, 3)


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (forward, capabilities)."""
    parser = argparse.ArgumentParser(prog="python -m attncheck.adapters.onnxruntime", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", choices=sorted(CAPABILITIES), default="attention",
                        help="the operator to check (default: attention)")
    parser.add_argument("--opset", type=int, choices=OPSETS, default=23,
                        help="--op attention's opset: 24 passes key lengths as nonpad_kv_seqlen (default: 23)")
    args = parser.parse_args(argv)
    if args.opset != 23 and args.op != "attention":
        parser.error("--opset is --op attention's (the contrib operators are version 1 of com.microsoft)")
    if args.op == "attention":
        return dict(forward=functools.partial(forward, opset=args.opset), **claims_attention(args.opset))
    return dict(forward=forward_gqa, **claims_gqa()) if args.op == "gqa" else dict(forward=forward_mha, **claims_mha())


def claims_attention(opset):
    """--op attention's claims, or one line and exit 2 where the release or onnx cannot stamp `opset`."""
    most, ir = loads()
    if most < opset:
        first = min(row for row, (loaded, _) in LOADS.items() if loaded >= opset)
        refuse("onnxruntime", f"onnxruntime {ort.__version__} loads ONNX opset {most} at most (IR version {ir}), and "
                              f"--op attention is the Attention operator of opset {opset}: it needs onnxruntime "
                              f"{first[0]}.{first[1]} or later (--op gqa and mha run here)")
    if onnx.defs.onnx_opset_version() < opset:
        refuse("onnxruntime", f"onnx {onnx.__version__} knows ONNX opset {onnx.defs.onnx_opset_version()} at most: "
                              f"--op attention --opset {opset} needs an onnx that has its Attention operator")
    return dict(capabilities=CAPABILITIES["attention"], restrictions=RESTRICTIONS["attention"])


def claims_gqa():
    """--op gqa's claims on this release: its softcap attribute and attention_bias and head_sink inputs came
    later than the operator, and before its `causal` attribute (onnxruntime 1.30) it is always causal."""
    attributes, inputs, kernel = contrib_schema("GroupQueryAttention")
    if not kernel:
        refuse("onnxruntime", f"onnxruntime {ort.__version__} has no CPU kernel of com.microsoft GroupQueryAttention "
                              f"(1.18.1 has one, 1.17.3 none): --op gqa cannot run here")
    claims = CAPABILITIES["gqa"] - ({"softcap"} - attributes) - ({"bias"} if "attention_bias" not in inputs else set())
    claims -= {"sinks"} if "head_sink" not in inputs else set()
    if "causal" not in attributes:  # every call causal, lower-right (no KV-end call is then drawn)
        return dict(capabilities=claims, restrictions=RESTRICTIONS["gqa"] + ["lower_right", "causal"])
    return dict(capabilities=claims, restrictions=RESTRICTIONS["gqa"])


def claims_mha():
    """--op mha's claims on this release: `unidirectional` (causal) and the attention_bias input came later."""
    attributes, inputs, _ = contrib_schema("MultiHeadAttention")
    claims = CAPABILITIES["mha"] - ({"causal"} if "unidirectional" not in attributes else set())
    claims -= {"bias"} if "attention_bias" not in inputs else set()
    return dict(capabilities=claims, restrictions=RESTRICTIONS["mha"])


def main(argv=None):
    serve("onnxruntime", setup(argv))


if __name__ == "__main__":
    main()
