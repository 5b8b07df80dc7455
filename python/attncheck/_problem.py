"""One attention problem as the checker sends it, in NumPy.

Shapes: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], allow [B,Tq,Tk], kv_lens [B],
bias [B,H,Tq,Tk], sinks [H], out [B,H,Tq,dv], lse [B,H,Tq], keep [B,H,Tq,Tk]; query head h reads KV
head h // (H // H_kv).
"""
import math

import numpy as np

from . import _protocol as wire


def read_scalars(call, fields, headers, what):
    """Sets a Problem's or Layer's fields of the named headers (set_fields: its dims, ...) and its
    dtype, causal, window and scale, from a PROB's fields (read_headers); a code outside its table
    is a ValueError naming `what`."""
    for name, word, codes in (("format", "dtype", wire.DTYPES), ("causal", "causal", wire.CAUSAL)):
        if fields[name] not in codes:
            raise ValueError(f"{what} with {word} code {fields[name]}; the codes are {sorted(codes)}")
    wire.set_fields(call, fields, headers)
    call.dtype, call.causal = wire.DTYPES[fields["format"]], wire.CAUSAL[fields["causal"]]
    left, right = fields["window_left"], fields["window_right"]
    call.window = None if left < 0 and right < 0 else (left, right)
    call.scale = fields["scale"] or None  # 0: the default, 1/sqrt(dk)


def _permitted(call, B, Tq, Tk, allow, kv_lens):
    """bool [B,Tq,Tk]: the masks of a call (a Problem or a Layer: its causal and window) at Tq queries and Tk
    keys, allow [B,Tq,Tk] and kv_lens [B] or None."""
    i = np.arange(Tq)[:, None]
    j = np.arange(Tk)[None, :]
    diagonal = i + Tk - Tq  # where lower-right causal and the window are anchored
    permitted = np.ones((B, Tq, Tk), bool)
    if allow is not None:
        permitted &= allow
    if kv_lens is not None:
        permitted &= j[None] < kv_lens[:, None, None]
    if call.causal == "upper-left":
        permitted &= j <= i
    elif call.causal == "lower-right":
        permitted &= j <= diagonal
    elif call.causal == "kv-end":  # the diagonal at each batch's key length (Tk without)
        keys = np.full(B, Tk) if kv_lens is None else kv_lens
        permitted &= j[None] <= i[None] + keys[:, None, None] - Tq
    if call.window is not None:
        left, right = call.window
        if left >= 0:
            permitted &= j >= diagonal - left
        if right >= 0:
            permitted &= j <= diagonal + right
    return permitted


class Problem:
    """The problem's fields, as the README and docs/protocol.md give them.

    dtype: "f32", "f64", "f16" or "bf16" (bf16 values arrive as float32 holding bf16 values).
    q, k, v: read-only arrays. allow: None or bool [B,Tq,Tk], True = may attend. kv_lens: None or
    int32 [B]. causal: "none", "upper-left" (j <= i), "lower-right" (j <= i + Tk - Tq) or "kv-end"
    (j <= i + kv_lens[b] - Tq, capability 'kv_cache').
    window: None or (left, right), -1 = unbounded: key j needs i + Tk - Tq - left <= j <= i + Tk - Tq + right.
    scale: None (meaning 1/sqrt(dk)) or a float. softcap: None or a float (score = softcap *
    tanh(scale q.k / softcap)). bias: None or [B,H,Tq,Tk], added after the soft-cap, -inf forbids.
    dropout_p: 0.0 (none) or the dropout rate in (0, 1): after the softmax over permitted keys each
    weight is kept with probability 1 - dropout_p and divided by 1 - dropout_p, else 0 (PyTorch's
    order); lse stays that of the weights before dropout. dropout_seed: 0, or the seed of the
    function's own random stream (the same problem and seed must give the same result:
    torch.manual_seed(p.dropout_seed), say). want_lse, want_keep: whether the function must return
    lse and the keep mask [B,H,Tq,Tk] (1 = kept, 0 = dropped; capability 'dropout_mask'): out, or
    a tuple of out and those asked, in the order (out, lse, keep). sinks: None or float32 [H]
    (capability 'sinks'): one logit per query head that every row's softmax denominator gains as
    exp(sinks[h] - m), with no value, not scaled, soft-capped or masked; lse includes it, and a row
    with no permitted key gives 0 and lse sinks[h] (-inf: no sink). Paged KV (capability 'paged_kv'):
    k and v are pools [NB,H_kv,BS,d], key j of batch b in slot j % BS of block block_table[b][j // BS].
    Varlen (capability 'varlen', S = B + 1, else S = 0): the B sequences packed, q [H,Tq,dk], k and v
    [H_kv,Tk,d], out [H,Tq,dv], lse [H,Tq], sequence b's queries rows cu_seqlens_q[b] to
    cu_seqlens_q[b+1] - 1 and its keys likewise (int32 [B+1] each); masks apply within each
    sequence at its own lengths. For a backward, out and lse are
    the forward's (given), and dout the gradient of out. Each input of a forward or a backward
    (_features.SLOTS) is the attribute named as its slot, None when the call does not carry it.
    """

    def __init__(self, payload):
        fields, at = wire.read_headers(payload)
        read_scalars(self, fields, [h["name"] for h in wire.HEADERS if h["flag"] != "mha"], "a PROB")  # all but the layer's
        self.softcap = fields["softcap"] or None
        self.want_lse = bool(fields["flags"] & wire.WANT_LSE)
        self.want_keep = bool(fields["flags"] & wire.WANT_KEEP)
        self.backward = bool(fields["flags"] & wire.BACKWARD)
        self.S = self.B + 1 if fields["flags"] & wire.FLAGS["varlen"] else 0  # cu_seqlens' entries: packed sequences
        tensors = wire.read_inputs(payload, at, "backward" if self.backward else "forward", self.dtype, self._shape,
                                   fields["flags"])
        for name in dict.fromkeys(s["name"] for kind in ("forward", "backward") for s in wire.inputs(kind)):
            setattr(self, name, tensors.get(name))

    def _shape(self, slot):
        """The shape of a slot of SLOTS (q, out, lse, ...) in this problem."""
        return wire.slot_shape(slot, vars(self))

    @property
    def softmax_scale(self):
        """The scale to apply: the given one, else 1/sqrt(dk)."""
        return 1 / math.sqrt(self.dk) if self.scale is None else self.scale

    def mask(self):
        """bool [B,H,Tq,Tk], True = may attend: allow, key lengths, causal and window combined. Varlen:
        [1,H,Tq,Tk] over the packed rows, query r of sequence b seeing key c when c is one of b's keys and
        b's causal mask and window permit them at b's own lengths (the contract's dense twin)."""
        if not getattr(self, "S", 0):  # dense (a Layer, which shares this mask, has no packed sequences)
            return np.repeat(_permitted(self, self.B, self.Tq, self.Tk, self.allow, self.kv_lens)[:, None], self.H, axis=1)
        permitted = np.zeros((1, self.Tq, self.Tk), bool)
        rows, keys = self.cu_seqlens_q, self.cu_seqlens_k
        for b in range(self.B):
            permitted[0, rows[b]:rows[b + 1], keys[b]:keys[b + 1]] = \
                _permitted(self, 1, rows[b + 1] - rows[b], keys[b + 1] - keys[b], None, None)
        return np.repeat(permitted[:, None], self.H, axis=1)

    def __repr__(self):
        return (f"Problem({self.dtype}, B={self.B}, H={self.H}, H_kv={self.H_kv}, Tq={self.Tq}, Tk={self.Tk}, "
                f"dk={self.dk}, dv={self.dv}, causal={self.causal!r}, window={self.window}, scale={self.scale}, "
                f"softcap={self.softcap}, allow={'yes' if self.allow is not None else None}, "
                f"kv_lens={None if self.kv_lens is None else self.kv_lens.tolist()}, "
                f"bias={'yes' if self.bias is not None else None}, want_lse={self.want_lse}"
                + (f", dropout_p={self.dropout_p}, dropout_seed={self.dropout_seed}, want_keep={self.want_keep}"
                   if self.dropout_p else "") + ")")
