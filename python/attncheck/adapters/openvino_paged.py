"""OpenVINO's PagedAttentionExtension (openvino.op._PagedAttentionExtension, the op vLLM's OpenVINO
backend and openvino.genai run; the CPU plugin's PagedAttention node), as a child of
`attncheck check --impl-cmd`:

  build/cli/attncheck check --impl-cmd "VENV_PYTHON -m attncheck.adapters.openvino --op paged"
  (or "VENV_PYTHON -m attncheck.adapters.openvino_paged")

with PYTHONPATH=python and a venv holding openvino 2026.4.1 (the op's 28 inputs; an older release's
op has 13 to 25 and is refused at start).

What the op computes (src/core/src/op/paged_attention.cpp, the CPU plugin's
src/plugins/intel_cpu/src/nodes/paged_attn.cpp and kernels/scaled_attn/executor_pa.cpp; measured by
this adapter's hand tests, examples/openvino/test_paged.py): a batch of sequences, each with
past_lens[s] keys already in the cache and the new tokens subsequence_begins[s] ..
subsequence_begins[s+1] - 1 given as query, key and value rows [tokens, heads * head size]. The op
writes the new keys and values into the cache (key j of sequence s is slot j % block_size of block
block_indices[block_indices_begins[s] + j // block_size]) and new token t of sequence s (its key is
key past_lens[s] + t) attends to keys 0 .. past_lens[s] + t: causal over past and new tokens, the
diagonal at the end of the cache. Query head h reads KV head h // (H / H_kv). The CPU plugin takes
the caches as [blocks, H_kv, 32, dk] and [blocks, H_kv, 32, dv]: it rewrites the model's cache
inputs to its own block size, 32 in 2026.4, whatever the model says, and to u8 (quantized) unless
KEY_CACHE_PRECISION and VALUE_CACHE_PRECISION say otherwise; this adapter asks for the cache in the
problem's format. Measured too: in f32, a prefill sets the value cache's slots past the sequence in
its last block to 0 (writes beyond the sequence; a decode step leaves them).

How a problem reaches the op:

  masks       The op has one mask, its own: new token t of a sequence with past keys sees keys
              past + t - w + 1 .. past + t (w the sliding window, 0: from key 0). A batch whose
              queries i see keys past_b + i - w + 1 .. past_b + i (p.mask(): causal, key lengths,
              window) is one sequence of Tq new tokens: a prefill, or a decode step when Tq = 1
              (KV-end causal with kv_lens[b] >= Tq, lower-right with Tq <= Tk, upper-left with
              keys past Tq unseen). Translated: a batch whose every query i sees keys hi_i - w + 1
              .. hi_i otherwise (no causal mask with Tq > 1, upper-left or lower-right with key
              lengths) is Tq sequences of one new token each, past hi_i, over the batch's same
              blocks: decode steps over one cache, as a serving engine batches them. Refused with
              NotExpressible (counted as not taken, never a finding): a query with no key (the op
              has none: Tq > kv_lens[b] under KV-end, Tq > Tk under lower-right), and windows that
              are not one w for every query (a window's right edge before the diagonal, say). Not
              claimed: allow masks, a bias, a soft-cap (the op has alibi slopes, not a bias), lse
              (the op's second output is per-key scores aggregated for cache eviction, not a
              log-sum-exp), backward. So EmptyRowsFollowThePolicy (a key length of 0) is never
              taken: a campaign that finds nothing says INCONCLUSIVE, not PASS (no restriction
              says "no empty rows"; dropping kv_lens would drop the sequences' own lengths).
  new tokens  The keys a sequence's new tokens are (keys past .. past + n - 1 of its batch): the
              op's key and value inputs, read from the problem (through its block table when
              paged) as rows [tokens, H_kv * d]; the queries rows [tokens, H * dk].
  the cache   Translated: attncheck's pool has blocks of BS keys (1, 2, 3, 5, 7, 16), the CPU op's
              has 32 per block, so the adapter lays each sequence's key positions out in blocks of
              32 of its own (the batches' blocks in reverse order in the pool): slot n of
              batch b holds what the problem holds at key position n, poison included (a paged
              problem: pool slot n % BS of block block_table[b, n // BS], for n < BPS * BS, which
              covers the slots past the sequence's keys the checker poisons; a dense one: key n
              for n < Tk), and NaN where the problem names no slot (n >= BPS * BS or n >= Tk), as
              the checker poisons the slots it names no key in. Nothing is cleaned: the op gets
              every slot of its blocks as the problem holds it.
  scale       the op's scale input (f32 scalar, in every format), which has no default: the
              problem's scale in float32, or 1/sqrt(dk) in float32 when the problem says default.
  other       score_aggregation_window (input 13) [B] zeros: the op validates a scalar too, but
              the CPU node then fails with B > 1 ("m_dims=[1,] expect_dims=[3,]", plain_tensor.hpp);
              no alibi slopes, rotation, XAttention, adaptive R-KV, token types or qq_bias (empty
              inputs, as openvino.genai gives them). The op's second and third
              outputs (scores for cache eviction and the like) are not read.
  gqa         the op's own: query heads H, key/value heads H_kv (the rows' widths H * dk and
              H_kv * dk, and the rt_info num_k_heads, k_head_size, num_v_heads, v_head_size the CPU
              plugin requires).
  f32, bf16   the query, keys, values and caches in the problem's format (bf16 values as an
              ov.Tensor of bf16 bits), KEY_CACHE_PRECISION and VALUE_CACHE_PRECISION the same,
              INFERENCE_PRECISION_HINT f32: the node runs in its inputs' type (bf16 on a CPU with
              AVX512-BF16 or AMX, this machine's). Not claimed: f16 (compile_model refuses f16
              caches here: "expect kvcache type bf16, current: f32, f32", executor_pa.cpp, on a CPU
              without AVX512-FP16; an f32 cache under an f16 model would be a translation of the
              format), f64 (the op has no f64 kernel).
  sinks       the op's sinks input (input 20) [1, H, 1, 1] f32, when the problem has sinks (the
              hand test shows the contract's meaning: each row's denominator gains exp(sink - m)).

What attncheck found (2026.4.1, CPU; each shown with OpenVINO alone in examples/openvino/):
repro_paged_forbidden_value_nan.py (in a prefill, an inf or NaN value of a new token that the
causal mask hides from an earlier one makes that row NaN: weight 0 times inf; the strict contract's
finding, accepted under --masked-inputs finite), repro_paged_prefill_swallows_nan_score.py (a score
of (-inf) + (+inf) is NaN in a decode step, finite in a prefill: DecodeEqualsPrefill),
repro_paged_bf16_odd_head_size_wrong.py (bf16 prefill with an odd dk: wrong values, NaN at times,
varying between compilations), repro_paged_window_value_nan.py (an inf or NaN value of a cached
key before the sliding window makes every row NaN; accepted under --masked-inputs finite).
"""
import argparse
import functools
import math

import numpy as np

from . import NotExpressible, library, serve

ov = library("openvino", "openvino_paged", entry="op._PagedAttentionExtension", since="2026.4")
opset = __import__("openvino.opset13", fromlist=["parameter"])
PA = ov.op._PagedAttentionExtension

INPUTS = 28          # 2026.4's PagedAttentionExtension
CPU_BLOCK_SIZE = 32  # what the CPU plugin rewrites the caches' block dimension to
SINKS = True         # the op's sinks input claimed (examples/openvino/test_paged.py checks its meaning)
CAPABILITIES = {"f32", "bf16", "causal", "kv_cache", "kv_lens", "gqa", "window", "paged_kv"} | ({"sinks"} if SINKS else set())
ELEMENT = {"f32": ov.Type.f32, "bf16": ov.Type.bf16}
_CORE = ov.Core()


def config(dtype):
    """compile_model's config: the caches in the problem's format (not the plugin's default u8), and
    INFERENCE_PRECISION_HINT f32 (a bf16 model's node still runs in bf16, its inputs' type)."""
    return {"INFERENCE_PRECISION_HINT": "f32", "KEY_CACHE_PRECISION": dtype, "VALUE_CACHE_PRECISION": dtype}


def _constant(value, dtype):
    return opset.constant(np.array(value, dtype))


@functools.lru_cache(maxsize=64)
def compiled(H, H_kv, dk, dv, sinks, dtype="f32"):
    """A CompiledModel of one PagedAttentionExtension for these heads and widths (the tokens, blocks
    and sequences are dynamic) and its inputs' names in order. sinks: whether the sinks input is a
    Parameter [1, H, 1, 1]; dtype: "f32" or "bf16", the query's, keys', values' and caches' type."""
    f32, i32, T = ov.Type.f32, ov.Type.i32, ELEMENT[dtype]
    P = opset.parameter
    params = {
        "query": P([-1, H * dk], T, name="query"), "key": P([-1, H_kv * dk], T, name="key"),
        "value": P([-1, H_kv * dv], T, name="value"),
        "key_cache": P([-1, H_kv, CPU_BLOCK_SIZE, dk], T, name="key_cache"),
        "value_cache": P([-1, H_kv, CPU_BLOCK_SIZE, dv], T, name="value_cache"),
        "past_lens": P([-1], i32, name="past_lens"), "subsequence_begins": P([-1], i32, name="subsequence_begins"),
        "block_indices": P([-1], i32, name="block_indices"),
        "block_indices_begins": P([-1], i32, name="block_indices_begins"),
        "scale": P([], f32, name="scale"), "sliding_window": P([], i32, name="sliding_window"),
        "max_context_len": P([], i32, name="max_context_len"),
        "score_aggregation_window": P([-1], i32, name="score_aggregation_window")}
    if sinks:
        params["sinks"] = P([1, H, 1, 1], f32, name="sinks")
    none_f, none_i = np.zeros(0, np.float32), np.zeros(0, np.int32)
    inputs = [params["query"], params["key"], params["value"], params["key_cache"], params["value_cache"],
              params["past_lens"], params["subsequence_begins"], params["block_indices"],
              params["block_indices_begins"], params["scale"],
              params["sliding_window"],      # 10 (0: none)
              _constant(none_f, np.float32),  # 11 alibi_slopes: none
              params["max_context_len"],
              params["score_aggregation_window"],  # 13
              _constant(none_i, np.int32), _constant(none_i, np.int32), _constant(none_f, np.float32),  # 14-16 rotation: none
              _constant(none_f, np.float32), _constant(64, np.int32), _constant(8, np.int32),  # 17-19 xattention: off
              params["sinks"] if sinks else _constant(none_f, np.float32),  # 20 sinks
              _constant(0, np.int32), _constant(none_i, np.int32), _constant(none_i, np.int32),
              _constant(none_i, np.int32),   # 21-24 adaptive R-KV: off
              _constant(none_i, np.int32),   # 25 token_type_ids: none
              _constant(np.zeros(0, np.uint8), np.uint8), _constant(none_i, np.int32)]  # 26-27 qq_bias: none
    assert len(inputs) == INPUTS
    node = PA([x.output(0) for x in inputs])
    rt = node.get_rt_info()
    rt["num_k_heads"], rt["k_head_size"], rt["num_v_heads"], rt["v_head_size"] = H_kv, dk, H_kv, dv
    model = ov.Model([node.output(0)], list(params.values()), "paged_attention")
    return _CORE.compile_model(model, "CPU", config(dtype)), list(params)


def op_mask(past, window, Tq, Tk):
    """The op's mask [Tq, Tk] for a sequence of past keys and Tq new ones: new token i sees keys
    past + i - window + 1 .. past + i (window 0: from key 0), executor_pa.cpp's ncausal and start_idx."""
    i, j = np.arange(Tq)[:, None], np.arange(Tk)[None, :]
    return (j <= past + i) & ((window == 0) | (j > past + i - window))


def sequences(p):
    """(the op's sequences, the sliding window, 0 for none) for problem p's masks, or NotExpressible
    saying why there are none. A sequence: (batch b, past, the queries i it computes, in order). A batch
    whose queries see keys 0 .. past + i (within the window) is one sequence of Tq new tokens (a
    prefill, or a decode step when Tq = 1); any other batch whose every query sees keys
    lo_i .. hi_i, lo_i = max(0, hi_i - w + 1), is Tq sequences of one new token each, past hi_i,
    reading the same blocks (decode steps over one cache)."""
    permitted = p.mask()[:, 0]  # [B,Tq,Tk]: the same for every head (no bias, no per-head mask claimed)
    seen = permitted.any(-1)
    last = np.where(seen, p.Tk - 1 - np.argmax(permitted[..., ::-1], -1), -1)  # each query's last key
    first = np.argmax(permitted, -1)
    binding = seen & (first > 0)  # rows a window cuts: it is their last key - first key + 1 wide
    widths = set((last - first + 1)[binding].tolist())
    window = widths.pop() if len(widths) == 1 else 0
    found = []
    for b in range(p.B):
        rows = [op_mask(int(last[b, i]), window, 1, p.Tk)[0] for i in range(p.Tq)]
        if widths or not seen[b].all() or not np.array_equal(permitted[b], np.array(rows)):
            raise NotExpressible(f"batch {b}'s queries do not each see keys hi - w + 1 .. hi (one w; no row empty): "
                                 f"causal {p.causal}, window {p.window}, Tq {p.Tq}, Tk {p.Tk}"
                                 + ("" if p.kv_lens is None else f", kv_lens {p.kv_lens.tolist()}"))
        past = int(last[b, 0])
        if np.array_equal(last[b], past + np.arange(p.Tq)):
            found.append((b, past, list(range(p.Tq))))
        else:
            found += [(b, int(last[b, i]), [i]) for i in range(p.Tq)]
    return found, window


def key_positions(p, b, x, d, count):
    """What problem p holds at key positions 0 .. count - 1 of batch b, [count, H_kv, d], from x (p.k
    or p.v): through the block table when paged; NaN at a position it names no slot for."""
    out = np.full((count, p.H_kv, d), np.nan, np.float32)
    if p.BS > 0:
        n = np.arange(min(count, p.BPS * p.BS))
        out[n] = np.asarray(x, np.float32)[p.block_table[b, n // p.BS], :, n % p.BS]
    else:
        n = min(count, p.Tk)
        out[:n] = np.asarray(x, np.float32)[b, :, :n].transpose(1, 0, 2)
    return out


def translate(p):
    """The op's inputs for problem p, by name, the sinks flag of its compiled model, and the (b, i) of
    each new token in order."""
    if p.dtype not in ELEMENT:
        raise ValueError(f"format {p.dtype} is not claimed")
    if p.allow is not None or p.bias is not None or p.softcap is not None or p.want_lse or p.backward:
        raise ValueError("an allow mask, a bias, a soft-cap, lse or backward is not claimed")
    found, window = sequences(p)
    BS = CPU_BLOCK_SIZE
    keys_of = {}  # each batch's key positions the op may read: up to its sequences' last new key
    for b, past, rows in found:
        keys_of[b] = max(keys_of.get(b, 0), past + len(rows))
    blocks = {b: -(-n // BS) for b, n in keys_of.items()}  # the op's blocks of each batch, shared by its sequences
    total = sum(blocks.values())
    key_cache = np.empty((total, p.H_kv, BS, p.dk), np.float32)
    value_cache = np.empty((total, p.H_kv, BS, p.dv), np.float32)
    ids, held, at = {}, {}, total
    for b in sorted(blocks):
        ids[b] = list(range(at - 1, at - 1 - blocks[b], -1))  # its blocks, placed in reverse
        at -= blocks[b]
        for name, x, d, cache in (("k", p.k, p.dk, key_cache), ("v", p.v, p.dv, value_cache)):
            held[b, name] = key_positions(p, b, x, d, blocks[b] * BS)  # [blocks * 32, H_kv, d]
            cache[ids[b]] = held[b, name].reshape(blocks[b], BS, p.H_kv, d).transpose(0, 2, 1, 3)
    q = np.asarray(p.q, np.float32)
    queries, keys, values, pasts, begins, block_indices, block_begins, order = [], [], [], [], [0], [], [0], []
    for b, past, rows in found:
        n = len(rows)
        queries.append(q[b][:, rows].transpose(1, 0, 2).reshape(n, p.H * p.dk))
        keys.append(held[b, "k"][past:past + n].reshape(n, p.H_kv * p.dk))
        values.append(held[b, "v"][past:past + n].reshape(n, p.H_kv * p.dv))
        pasts.append(past)
        begins.append(begins[-1] + n)
        block_indices += ids[b][:-(-(past + n) // BS)]
        block_begins.append(len(block_indices))
        order += [(b, i) for i in rows]
    scale = np.float32(1 / math.sqrt(p.dk) if p.scale is None else p.scale)
    of = functools.partial(_format, p.dtype)
    feeds = {
        "query": of(np.concatenate(queries)), "key": of(np.concatenate(keys)), "value": of(np.concatenate(values)),
        "key_cache": of(key_cache), "value_cache": of(value_cache),
        "past_lens": np.array(pasts, np.int32), "subsequence_begins": np.array(begins, np.int32),
        "block_indices": np.array(block_indices, np.int32), "block_indices_begins": np.array(block_begins, np.int32),
        "scale": scale, "sliding_window": np.int32(window),
        "max_context_len": np.int32(max(past + len(rows) for _, past, rows in found)),
        "score_aggregation_window": np.zeros(len(found), np.int32)}
    sinks = getattr(p, "sinks", None) is not None
    if sinks:
        feeds["sinks"] = np.ascontiguousarray(np.asarray(p.sinks, np.float32).reshape(1, p.H, 1, 1))
    return feeds, sinks, order


def _format(dtype, array):
    """An input of the format: float32 as it is; bf16 values (float32 holding bf16) an ov.Tensor of bf16 bits."""
    array = np.ascontiguousarray(array, np.float32)
    if dtype == "bf16":
        bits = (array.view(np.uint32) >> 16).astype(np.uint16)  # exact: the values are bf16's (NaN stays NaN)
        return ov.Tensor(bits, list(bits.shape), ov.Type.bf16)
    return array


def forward(p):
    feeds, sinks, order = translate(p)
    model, names = compiled(p.H, p.H_kv, p.dk, p.dv, sinks, p.dtype)
    out = model([feeds[name] for name in names])[model.output(0)]  # [tokens, H * dv]
    if p.dtype == "bf16":  # bf16 bits, which OpenVINO shows NumPy as float16
        out = (np.ascontiguousarray(out).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    elif out.dtype != np.float32:
        raise TypeError(f"PagedAttentionExtension returned {out.dtype} for an f32 problem")
    result = np.empty((p.B, p.Tq, p.H, p.dv), out.dtype)
    b, i = np.array(order).T
    result[b, i] = out.reshape(len(order), p.H, p.dv)  # each token's row where its query is
    return result.transpose(0, 2, 1, 3)


def setup(argv=None, prog="python -m attncheck.adapters.openvino_paged"):
    """The keywords of attncheck.serve (forward, capabilities); no option but --help."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    return dict(forward=forward, capabilities=CAPABILITIES)


def main(argv=None):
    serve("openvino_paged", setup(argv))


if __name__ == "__main__":
    main()
