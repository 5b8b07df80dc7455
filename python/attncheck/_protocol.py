"""The child protocol (docs/protocol.md), the child's side: frames on stdin and stdout.

Every number is little-endian; tensors are raw and contiguous. A frame is a 4-letter tag, the
payload's length (u32) and the payload.
"""
import math
import struct

import numpy as np

# The feature table (capability bits, flag bits, dtypes, storage), generated from the C++ one.
from ._features import (CAPABILITIES, CAUSAL, DIMS, DTYPES, FLAGS, HEAD_DIMS, HEADERS, LIMITS, LINES, LSE_STORAGE,
                        RESTRICTIONS, SLOTS, STORAGE)

VERSION = 1
ABI = 2

_DTYPE_CODES = {name: code for code, name in DTYPES.items()}
_CAUSAL_CODES = {name: code for code, name in CAUSAL.items()}

HAS_ALLOW, HAS_KV_LENS, HAS_BIAS, WANT_LSE, BACKWARD, HAS_DROPOUT, WANT_KEEP = (
    FLAGS[n] for n in ("allow", "kv_lens", "bias", "lse", "backward", "dropout", "dropout_mask"))


def _layout(header):
    """A header of HEADERS as (the FLAGS bit that brings it or 0, its struct.Struct, its fields' names)."""
    codes, at = "<", 0
    for _, offset, code in header["fields"]:
        codes += "x" * (offset - at) + code
        at = offset + struct.calcsize("<" + code)
    flag = FLAGS[header["flag"]] if header["flag"] else 0
    return flag, struct.Struct(codes + "x" * (header["size"] - at)), [name for name, _, _ in header["fields"]]


# The dims a PROB's first header holds (B .. dv; a layer's D is in its own header).
PROBLEM_DIMS = [name for name, _, _ in HEADERS[0]["fields"] if name in DIMS]


def write_headers(fields):
    """A PROB's headers: each one that fields["flags"] brings, in wire order, its fields from `fields`
    by name (HEADERS: a dim, a scalar named as call_scalars.def names it, flags, parts), 0 if not given."""
    return b"".join(layout.pack(*(fields.get(name, 0) for name in names))
                    for flag, layout, names in map(_layout, HEADERS) if fields["flags"] & flag == flag)


def read_headers(payload, what="a PROB"):
    """The fields of a PROB's headers by name, those of a header its flags do not bring 0, and the
    byte its buffers start at; a payload too short for them is a ValueError naming `what`."""
    fields = {name: 0.0 if code == "d" else 0 for h in HEADERS for name, _, code in h["fields"]}
    at = 0
    for flag, layout, names in map(_layout, HEADERS):
        if fields["flags"] & flag == flag:
            if at + layout.size > len(payload):
                raise ValueError(f"{what} of {len(payload)} bytes is too short for its problem: shorter than its "
                                 f"headers ({at + layout.size} bytes)")
            fields.update(zip(names, layout.unpack_from(payload, at)))
            at += layout.size
    return fields, at


# The fields Problem and Layer show in a form of their own (dtype, the causal mode's name, window,
# None for a default scale or no soft-cap) or not at all (the protocol's own).
SHOWN_OTHERWISE = {"format", "causal", "window_left", "window_right", "scale", "softcap", "flags", "parts", "reserved"}


def set_fields(call, fields, headers):
    """Sets each field of the named headers (HEADERS' names) as call's attribute of its name, but
    those SHOWN_OTHERWISE: a dim, a dropout rate, a scalar a new row adds."""
    for h in HEADERS:
        if h["name"] in headers:
            vars(call).update((name, fields[name]) for name, _, _ in h["fields"] if name not in SHOWN_OTHERWISE)


# The call schema's slots (SLOTS, call_slots.def) a call of a kind ("forward", "backward" or "layer")
# may read, the PROB's buffers, and write, the RSLT's, each in wire order.
def inputs(kind):
    return [s for s in SLOTS if s["roles"][kind] in ("in", "in_if", "in_unless")]


def outputs(kind):
    return [s for s in SLOTS if s["roles"][kind] in ("out", "out_if")]


def carried(slot, kind, flags, parts=0):
    """Whether a call of `kind` carries `slot`, given its PROB flags and, for a layer call, its parts:
    call_schema.hpp's carried(), the flag of the slot's feature standing for its capability bit."""
    role = slot["roles"][kind]
    if role in ("in_if", "out_if"):
        return bool(parts & slot["part"] if slot["part"] else flags & FLAGS[slot["feature"]])
    if role == "in_unless":
        return not parts & slot["part"]
    return role != "none"


def storage(slot, dtype):
    """The NumPy dtype of a slot's elements in the protocol's bytes, in a call in `dtype`."""
    return {"format": STORAGE[dtype], "wide": LSE_STORAGE[dtype], "f32": "<f4", "int32": "<i4", "byte": np.uint8}[slot["element"]]


def slot_shape(slot, dims):
    """A slot's shape in a call whose dims (B, H, H_kv, Tq, Tk, dk, dv, D; NB, BS, BPS; S) `dims` gives by
    name: its pooled shape in a paged call (BS > 0), where it has one (k [NB, H_kv, BS, dk], v), its
    packed shape in a varlen call (S = B + 1 > 0: q [H, Tq, dk], k, v, out, lse; cu_seqlens [S])."""
    if slot["pooled"] and dims.get("BS", 0) > 0:
        return tuple(dims[d] for d in slot["pooled"])
    if slot["packed"] and dims.get("S", 0) > 0:
        return tuple(dims[d] for d in slot["packed"])
    return tuple(dims[d] for d in slot["shape"])


def _inputs(kind, tensors):
    """(flags, parts, buffers) of a PROB of `kind` given its inputs' bytes by slot name (None: absent):
    the flags and parts for which carried() is true of exactly the optional ones given (a part bit
    set for an in_if slot given, for an in_unless one left out), and the bytes of those carried, in
    wire order. A name that is not an input of `kind`, or a required input missing, is a TypeError."""
    slots = inputs(kind)
    unknown = set(tensors) - {s["name"] for s in slots}
    if unknown:
        raise TypeError(f"a {kind} call has no input {sorted(unknown)[0]!r}; its inputs are "
                        f"{', '.join(s['name'] for s in slots)}")
    flags = parts = 0
    for s in slots:
        role, given = s["roles"][kind], tensors.get(s["name"]) is not None
        if role == "in_unless" and not given or role == "in_if" and given and s["part"]:
            parts |= s["part"]
        elif role == "in_if" and given:
            flags |= FLAGS[s["feature"]]
    present = [s for s in slots if carried(s, kind, flags, parts)]
    missing = [s["name"] for s in present if tensors.get(s["name"]) is None]
    if missing:
        raise TypeError(f"a {kind} call needs input {missing[0]!r}")
    return flags, parts, b"".join(tensors[s["name"]] for s in present)


def read_buffers(data, at, slots, dtype, shape_of, what):
    """The buffers of `slots`, back to back in `data` from byte `at` to its end, by slot name, each in
    the shape shape_of(slot) gives (of its elements' count): a format one as decode() gives it, the
    others as stored (wide: LSE_STORAGE; int32; byte: uint8). `what` names data in the ValueError
    data not exactly that long raises."""
    buffers = {}
    for s in slots:
        shape = shape_of(s)
        nbytes = np.dtype(storage(s, dtype)).itemsize * math.prod(shape)
        if at + nbytes > len(data):
            raise ValueError(f"{what} of {len(data)} bytes is too short for its problem")
        chunk, at = data[at:at + nbytes], at + nbytes
        buffers[s["name"]] = (decode(dtype, chunk, shape) if s["element"] == "format" else
                              np.frombuffer(chunk, storage(s, dtype)).reshape(shape))
    if at != len(data):
        raise ValueError(f"{what} of {len(data)} bytes for a problem of {at}")
    return buffers


def read_inputs(payload, at, kind, dtype, shape_of, flags, parts=0, what="a PROB"):
    """The inputs of a PROB of `kind` (its flags and, a layer call, its parts) from byte `at` on, by
    slot name, in wire order: as read_buffers() gives them, a byte one (a mask) as bool, True for 1;
    None for each not carried."""
    slots = inputs(kind)
    buffers = read_buffers(payload, at, [s for s in slots if carried(s, kind, flags, parts)], dtype, shape_of, what)
    tensors = {}
    for s in slots:
        x = buffers.get(s["name"])
        tensors[s["name"]] = x != 0 if x is not None and s["element"] == "byte" else x
    return tensors


def problem_payload(dtype, dims, causal="none", window=None, scale=0.0, softcap=0.0, *, want_lse=False, dropout=None,
                    want_keep=False, **tensors):
    """A PROB frame's payload: its headers (HEADERS: the dropout's when dropout is (p, seed)),
    then the forward's inputs in SLOTS' order (q, k, v, then allow, kv_lens and bias when given),
    each a keyword named as its slot, the optional ones None or left out when absent. dtype and
    causal by name; dims (B, H, H_kv, Tq, Tk, dk, dv); each buffer as bytes, in its slot's storage
    (allow uint8, kv_lens int32). want_keep asks for the keep mask (with dropout only)."""
    left, right = window if window is not None else (-1, -1)
    if want_keep and dropout is None:
        raise ValueError("the keep mask is asked for with dropout only")
    flags, _, buffers = _inputs("forward", tensors)
    flags |= (WANT_LSE if want_lse else 0) | (HAS_DROPOUT if dropout is not None else 0) | (WANT_KEEP if want_keep else 0)
    rate, seed = dropout if dropout is not None else (0.0, 0)
    return write_headers(dict(zip(PROBLEM_DIMS, dims), format=_DTYPE_CODES[dtype], flags=flags, causal=_CAUSAL_CODES[causal],
                              window_left=left, window_right=right, scale=scale, softcap=softcap, dropout_p=rate,
                              dropout_seed=seed)) + buffers


# The HELO capability bit of a layer-only function (no forward): features.hpp's kLayerOnly, not an ABI bit.
LAYER_ONLY = 1 << 31
# A layer call (docs/protocol.md, "A layer call"): flag 128, and 256 when each head's weights are asked.
HAS_LAYER, WANT_WEIGHTS = FLAGS["mha"], FLAGS["mha_weights"]
# Its header (HEADERS' "layer") holds D (the model width) and parts: these bits: self-attention (x_kv is x_q, not sent), and which biases are present.
SELF, B_Q, B_K, B_V, B_O = 1, 2, 4, 8, 16
# The flags a layer call never carries.
NOT_IN_A_LAYER = HAS_BIAS | WANT_LSE | BACKWARD | HAS_DROPOUT | WANT_KEEP


def layer_payload(dtype, dims, D, causal="none", window=None, scale=0.0, *, want_weights=False, **tensors):
    """A layer call's PROB payload: its headers (HEADERS: softcap 0; the layer's), then
    the layer's inputs in SLOTS' order (allow, kv_lens, x_q, x_kv, w_q, w_k, w_v, b_q, b_k, b_v,
    w_o, b_o), each a keyword named as its slot, the optional ones None or left out when absent.
    dtype and causal by name; dims (B, H, H_kv, Tq, Tk, dk, dv); D the model width; each tensor as
    bytes, in its slot's storage (allow uint8, kv_lens int32). x_kv absent is self-attention (part
    1: x_kv is x_q and not sent, so Tq must be Tk); a bias absent has its part bit clear."""
    left, right = window if window is not None else (-1, -1)
    flags, parts, buffers = _inputs("layer", tensors)
    flags |= HAS_LAYER | (WANT_WEIGHTS if want_weights else 0)
    return write_headers(dict(zip(PROBLEM_DIMS, dims), D=D, parts=parts, format=_DTYPE_CODES[dtype], flags=flags,
                              causal=_CAUSAL_CODES[causal], window_left=left, window_right=right, scale=scale)) + buffers


def _bits(names, table, what):
    bits = 0
    for name in names:
        if name not in table:
            raise ValueError(f"unknown {what} {name!r}; the names are {', '.join(table)}")
        bits |= table[name]
    return bits


def capability_bits(names):
    """The bits of a set of capability names; an unknown name is a ValueError naming the known ones."""
    return _bits(names, CAPABILITIES, "capability")


def restriction_bits(names):
    """The bits of a set of restriction names (`attncheck features` lists them); an unknown name is a
    ValueError naming the known ones."""
    return _bits(names, RESTRICTIONS, "restriction")


# The HELO: protocol, ABI, capabilities (12 bytes), then the domain: the restrictions and
# attncheck_limits (its size, max B, H, Tq, Tk, the head width's multiple and maximum, 16 widths).
HELLO = struct.Struct("<3I")
DOMAIN = struct.Struct("<Ii6i16i")


def limit_values(limits):
    """The numbers of DOMAIN's limits from a dict of LIMITS and HEAD_DIMS (a list); anything else, or a
    value that is not a whole number >= 1, is a ValueError naming what it takes."""
    limits = dict(limits or {})
    unknown = set(limits) - set(LIMITS) - {HEAD_DIMS}
    if unknown:
        raise ValueError(f"unknown limit {sorted(unknown)[0]!r}; the limits are {', '.join(LIMITS + [HEAD_DIMS])}")
    widths = list(limits.pop(HEAD_DIMS, []))
    if len(widths) > 16:
        raise ValueError(f"{HEAD_DIMS}: at most 16 widths, got {len(widths)}")
    for name, value in [*limits.items(), *((HEAD_DIMS, w) for w in widths)]:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
            raise ValueError(f"limit {name}: a whole number from 1 to 2^31 - 1, got {value!r}")
    return [limits.get(name, 0) for name in LIMITS] + widths + [0] * (16 - len(widths))


def hello_payload(abi, capabilities, restrictions=0, limits=None):
    """A HELO's payload: with no restriction and no limit the 12 bytes of old, else with the domain
    (limits imply the restriction within_limits)."""
    values = limit_values(limits)
    if any(values):
        restrictions |= RESTRICTIONS["within_limits"]
    payload = HELLO.pack(VERSION, abi, capabilities)
    return payload + DOMAIN.pack(restrictions, DOMAIN.size - 4, *values) if restrictions else payload


def read_frame(stream):
    """(tag, payload), or None at the end of the stream."""
    header = stream.read(8)
    if len(header) == 0:
        return None
    if len(header) < 8:
        raise EOFError("the checker closed the pipe inside a frame")
    tag, length = header[:4], struct.unpack("<I", header[4:])[0]
    payload = stream.read(length)
    if len(payload) < length:
        raise EOFError("the checker closed the pipe inside a frame")
    return tag, payload


def write_frame(stream, tag, *parts):
    stream.write(tag + struct.pack("<I", sum(len(p) for p in parts)))
    for part in parts:
        stream.write(part)
    stream.flush()


def widen_bf16(bits):
    """float32 holding the values of bf16 bit patterns (uint16)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def to_bf16_bits(x):
    """x rounded once to bf16 (to nearest, ties to even), as uint16 bit patterns.

    float64 goes through float32 rounded to odd, so that the two roundings give the one rounding.
    """
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if x.dtype == np.float64:
            y = x.astype(np.float32)
            back = y.astype(np.float64)
            inexact = np.isfinite(x) & (back != x)
            away = inexact & (np.abs(back) > np.abs(x))
            y[away] = np.nextafter(y[away], np.float32(0))
            bits = y.view(np.uint32)
            bits[inexact] |= 1
        else:
            bits = x.astype(np.float32).view(np.uint32)
        wide = bits.astype(np.uint64)
        rounded = ((wide + 0x7FFF + ((wide >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(bits.view(np.float32))
        rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded


def decode(dtype, data, shape):
    """A tensor in the problem's format: bf16 bits widened to float32; read-only, as the checker's inputs are."""
    array = np.frombuffer(data, dtype=STORAGE[dtype], count=int(np.prod(shape))).reshape(shape)
    if dtype == "bf16":
        array = widen_bf16(array)
        array.setflags(write=False)
    return array


def encode(dtype, array):
    """The bytes of an output in the format: rounded to it (bf16 as bit patterns)."""
    with np.errstate(all="ignore"):
        if dtype == "bf16":
            return to_bf16_bits(array).tobytes()
        return np.ascontiguousarray(array, dtype=STORAGE[dtype]).tobytes()
