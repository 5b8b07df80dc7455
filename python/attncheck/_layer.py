"""One multi-head attention layer call as the checker sends it, in NumPy (docs/protocol.md, "A layer call").

Shapes: x_q [B,Tq,D], x_kv [B,Tk,D], w_q [D,H dk], w_k [D,H_kv dk], w_v [D,H_kv dv], b_q [H dk],
b_k [H_kv dk], b_v [H_kv dv], w_o [H dv,D], b_o [D], allow [B,Tq,Tk], kv_lens [B]; out [B,Tq,D],
weights [B,H,Tq,Tk].
"""
from . import _protocol as wire
from ._problem import Problem, read_scalars


class Layer:
    """The layer's fields, as docs/protocol.md gives them.

    Q = x_q w_q + b_q, K = x_kv w_k + b_k, V = x_kv w_v + b_v; head h is columns h dk .. h dk + dk - 1
    of Q (h dv .. of V's heads) and reads KV head h // (H // H_kv); head_h = softmax(scale Q_h K_h^T
    over the permitted keys) V_h; out = concat_h(head_h) w_o + b_o. A missing bias is zero; a row
    with no permitted key has head 0 (NaN under --empty-rows nan), so its out is b_o.

    dtype: "f32", "f64", "f16" or "bf16" (bf16 values arrive as float32 holding bf16 values).
    x_q, x_kv, w_q, w_k, w_v, w_o: read-only arrays; x_kv is the same array object as x_q for
    self-attention (self_attention True, Tq == Tk). b_q, b_k, b_v, b_o: arrays or None (absent).
    allow: None or bool [B,Tq,Tk], True = may attend. kv_lens: None or int32 [B]. causal: "none",
    "upper-left" or "lower-right"; window: None or (left, right), -1 = unbounded (as Problem's).
    scale: None (meaning 1/sqrt(dk)) or a float. want_weights: whether the function must return
    (out, weights), weights [B,H,Tq,Tk] each head's softmax, 0 at a forbidden key (capability
    'mha_weights'); else out alone. Each input of a layer call (_features.SLOTS) is the attribute
    named as its slot, None when the call does not carry it (but x_kv, as said).
    """

    def __init__(self, payload):
        fields, at = wire.read_headers(payload, "a layer PROB")
        flags, parts = fields["flags"], fields["parts"]
        if not flags & wire.HAS_LAYER:
            raise ValueError(f"a PROB without the layer flag ({wire.HAS_LAYER}) read as a layer call")
        if flags & wire.NOT_IN_A_LAYER:
            raise ValueError(f"a layer PROB with flags {flags}: a layer call never carries bias, lse, backward "
                             f"or dropout ({wire.NOT_IN_A_LAYER & flags})")
        read_scalars(self, fields, ("header", "layer"), "a layer PROB")
        if fields["softcap"] != 0:
            raise ValueError(f"a layer PROB with softcap {fields['softcap']!r}; a layer call's softcap is 0")
        if fields["reserved"] != 0:
            raise ValueError(f"a layer PROB whose layer header ends in {fields['reserved']}, not 0")
        if parts & ~(wire.SELF | wire.B_Q | wire.B_K | wire.B_V | wire.B_O):
            raise ValueError(f"a layer PROB with unknown parts bits {parts:#x}")
        dims = {d: fields[d] for d in wire.DIMS if d in fields}  # (S: no field, B + 1 when varlen)
        if any(n < 0 for n in dims.values()):
            raise ValueError(f"a layer PROB with a negative size: {dims}")
        if self.H_kv <= 0 or self.H % self.H_kv:
            raise ValueError(f"a layer PROB with H {self.H} not a multiple of H_kv {self.H_kv}")
        self.self_attention = bool(parts & wire.SELF)
        if self.self_attention and self.Tq != self.Tk:
            raise ValueError(f"a self-attention layer PROB with Tq {self.Tq} != Tk {self.Tk}")
        self.want_weights = bool(flags & wire.WANT_WEIGHTS)
        # Each input a layer may carry (SLOTS), an attribute named as its slot; x_kv is x_q's array
        # for self-attention.
        tensors = wire.read_inputs(payload, at, "layer", self.dtype, self._shape, flags, parts, "a layer PROB")
        for name, tensor in tensors.items():
            setattr(self, name, tensor)
        if self.self_attention:
            self.x_kv = self.x_q

    def _shape(self, slot):
        """The shape of a slot of SLOTS in this call, a head count and its width one axis: w_q [D, H dk]
        where the slot's dims are D, H, dk (the layer's matrices, as x_q w_q multiplies them)."""
        dims, shape = slot["shape"], []
        for before, d in zip([None, *dims], dims):
            if before in ("H", "H_kv") and d in ("dk", "dv"):
                shape[-1] *= getattr(self, d)
            else:
                shape.append(getattr(self, d))
        return tuple(shape)

    # The scale to apply and the combined mask [B,H,Tq,Tk] (True = may attend): Problem's own.
    softmax_scale = Problem.softmax_scale
    mask = Problem.mask

    def __repr__(self):
        biases = [name for name in ("b_q", "b_k", "b_v", "b_o") if getattr(self, name) is not None]
        return (f"Layer({self.dtype}, B={self.B}, H={self.H}, H_kv={self.H_kv}, Tq={self.Tq}, Tk={self.Tk}, "
                f"D={self.D}, dk={self.dk}, dv={self.dv}, self_attention={self.self_attention}, "
                f"biases={biases or None}, causal={self.causal!r}, window={self.window}, scale={self.scale}, "
                f"allow={'yes' if self.allow is not None else None}, "
                f"kv_lens={None if self.kv_lens is None else self.kv_lens.tolist()}, "
                f"want_weights={self.want_weights})")
