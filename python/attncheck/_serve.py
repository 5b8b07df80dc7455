"""The child's side of the bridge: serve(forward) answers the checker's problems on stdin/stdout
(serve(layer=...) a layer's, docs/protocol.md "A layer call")."""
import os
import sys
import traceback

import numpy as np

from . import _protocol as wire
from ._layer import Layer
from ._problem import Problem


def _numpy(x, what):
    """A returned tensor as NumPy: a NumPy array, or anything with __array__ (a CPU torch tensor, detached)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
    try:
        return np.asarray(x)
    except Exception as e:
        raise TypeError(f"returned {what} as {type(x).__name__}, which is not an array: {e}") from None


def _shaped(x, shape, what):
    if x is None:
        raise TypeError(f"returned None as {what}")
    x = _numpy(x, what)
    if x.shape != shape:
        raise ValueError(f"returned {what} of shape {tuple(x.shape)}; the problem's is {shape}")
    return x


def _expect(x, shape, what):
    x = _shaped(x, shape, what)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"returned {what} of dtype {x.dtype}; expected a floating-point array")
    return x


def _mask_bytes(x, shape, what):
    """A returned mask's bytes (uint8: the keep mask's 1 = kept, 0 = dropped), from bool or integers 0
    and 1 alone: no other value is wrapped into a byte the checker would read as valid."""
    x = _shaped(x, shape, what)
    if x.dtype != bool and not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"returned {what} of dtype {x.dtype}; expected bool or integers (1 = kept, 0 = dropped)")
    if not np.isin(x, (0, 1)).all():
        raise ValueError(f"returned {what} with values other than 0 and 1: {np.unique(x[~np.isin(x, (0, 1))])[:5].tolist()}")
    return np.ascontiguousarray(x, dtype=np.uint8).tobytes()


def _result(call, kind, given):
    """A RSLT's buffers from the outputs a function returned, by slot name: those of a call of `kind`
    in SLOTS' order (docs/protocol.md), each checked against its shape in `call` (a Problem or a
    Layer): a format one rounded to the call's, a wide one as LSE_STORAGE, a byte one a mask."""
    parts = []
    for s in wire.outputs(kind):
        if s["name"] not in given:
            continue
        x, shape = given[s["name"]], call._shape(s)
        if s["element"] == "byte":
            parts.append(_mask_bytes(x, shape, s["name"]))
        elif s["element"] == "format":
            parts.append(wire.encode(call.dtype, _expect(x, shape, s["name"])))
        else:
            parts.append(np.ascontiguousarray(_expect(x, shape, s["name"]), dtype=wire.storage(s, call.dtype)).tobytes())
    return parts


# What a forward returns after out when the problem asks for it, in this order, and the capability that asks.
_EXTRAS = (("lse", "want_lse", "lse"), ("keep", "want_keep", "dropout_mask"))


def _forward_result(p, result):
    """A RSLT payload from forward's return: out, or a tuple of out and what the problem asks for, in
    the order (out, lse, keep); the RSLT's own order is SLOTS', out, keep, lse (docs/protocol.md)."""
    asked = [(name, capability) for name, wanted, capability in _EXTRAS if getattr(p, wanted)]
    if asked:
        form = ", ".join(["out"] + [name for name, _ in asked])
        claims = ", ".join(repr(capability) for _, capability in asked)
        if not isinstance(result, (tuple, list)) or len(result) != 1 + len(asked):
            given = "out alone" if not isinstance(result, (tuple, list)) else f"{len(result)} results"
            raise TypeError(f"returned {given}, but the problem asks for ({form}) (capability {claims})")
        out, *rest = result
    else:
        out, rest = (result[0] if isinstance(result, (tuple, list)) else result), []
    return _result(p, "forward", {"out": out, **dict(zip((name for name, _ in asked), rest))})


def _backward_result(p, result):
    """A RSLT payload from backward's return: the backward's outputs (dq, dk, dv) in SLOTS' order."""
    names = [s["name"] for s in wire.outputs("backward")]
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        raise TypeError(f"the backward returned something other than ({', '.join(names)})")
    return _result(p, "backward", dict(zip(names, result)))


def _layer_result(m, result):
    """A layer call's RSLT payload from layer's return: out [B,Tq,D], or (out, weights) when the
    call asks for the weights (weights [B,H,Tq,Tk], written as float32, float64 for f64)."""
    if m.want_weights:
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            given = "out alone" if not isinstance(result, (tuple, list)) else f"{len(result)} results"
            raise TypeError(f"returned {given}, but the layer call asks for (out, weights) (capability 'mha_weights')")
        out, weights = result
        return _result(m, "layer", {"out": out, "weights": weights})
    return _result(m, "layer", {"out": result[0] if isinstance(result, (tuple, list)) else result})


def default_capabilities(forward, layer=None):
    """What forward says it takes (attncheck.masked sets this), else what layer says, else float32
    alone; with "mha" when a layer function is given."""
    if forward is not None and hasattr(forward, "capabilities"):
        names = set(forward.capabilities)
    elif layer is not None and hasattr(layer, "capabilities"):
        names = set(layer.capabilities)
    else:
        names = {"f32"}
    if layer is not None:
        names.add("mha")
    return names


class NotExpressible(ValueError):
    """Raise it from a served function for a problem inside what it claims and its restrictions
    that the library under it cannot be given (an entry point with no scale argument, a causal
    mask of one alignment when attncheck sent the other): attncheck counts the call as not taken,
    never as a finding, and says how many were (`taken 4,980 of 5,114 calls; not taken 134 (...)`).
    A limit a restriction states (serve(restrictions=...)) is better said so: then no such call is
    sent at all."""


def serve(forward=None, capabilities=None, backward=None, layer=None, restrictions=None, limits=None):
    """Answers the checker's problems until it closes stdin: forward(p) -> out, or (out, lse) when
    p.want_lse, (out, keep) when p.want_keep, (out, lse, keep) when both; backward(p, dout) ->
    (dq, dk, dv) with p.out and p.lse the forward's; layer(m) -> out [B,Tq,D], or (out, weights)
    when m.want_weights, for a layer call (m an attncheck.Layer). forward may be None when layer
    is given (a layer-only function: the formats and masks claimed are then the layer's).

    restrictions: what it takes of what it claims, by the names `attncheck features` prints
    ("causal", "lower_right", "upper_left", "square", "self_attention", "default_scale",
    "equal_head_dims", "layer_head_width"): attncheck sends nothing else. limits: a dict of the
    largest shapes and the head widths it takes ("max_B", "max_H", "max_Tq", "max_Tk",
    "head_dim_multiple", "max_head_dim", "head_dims": a list). Both default to the function's own
    `restrictions` and `limits` attributes, else none. A call it cannot take that no restriction
    states raises NotExpressible (counted, not a finding).

    Run under `attncheck check --impl-cmd "python3 this_file.py"`. While serving, print() and
    anything else written to stdout goes to stderr (the checker shows it with a finding), and
    stdin reads as empty: the pipes are the protocol's.
    """
    if forward is None and layer is None:
        raise ValueError("serve() needs a forward function, a layer function (layer=...), or both")
    names = set(default_capabilities(forward, layer) if capabilities is None else capabilities)
    if backward is not None:
        names.add("backward")
    elif "backward" in names:
        raise ValueError("capability 'backward' needs serve(forward, backward=...)")
    if layer is not None:
        names.add("mha")
    elif names & {"mha", "mha_weights"}:
        raise ValueError("capabilities 'mha' and 'mha_weights' need serve(..., layer=...)")
    if backward is not None and forward is None:
        raise ValueError("serve(backward=...) needs the forward too")
    bits = wire.capability_bits(names) | (wire.LAYER_ONLY if forward is None else 0)
    own = forward if forward is not None else layer
    restricted = wire.restriction_bits(getattr(own, "restrictions", ()) if restrictions is None else restrictions)
    hello = wire.hello_payload(wire.ABI, bits, restricted, getattr(own, "limits", None) if limits is None else limits)
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the protocol's stdout is `answers` now; fd 1 and sys.stdout go to stderr
    sys.stdout = sys.stderr
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    wire.write_frame(answers, b"HELO", hello)
    while (frame := wire.read_frame(requests)) is not None:
        tag, payload = frame
        if tag != b"PROB":
            raise SystemExit(f"attncheck.serve: expected a PROB frame from the checker, got {tag!r}")
        try:
            if wire.read_headers(payload)[0]["flags"] & wire.HAS_LAYER:
                if layer is None:
                    raise TypeError("a layer call, but serve() was given no layer function (layer=...)")
                m = Layer(payload)
                parts = _layer_result(m, layer(m))
            else:
                if forward is None:
                    raise TypeError("an attention call, but serve() was given a layer function alone")
                p = Problem(payload)
                if p.backward:
                    parts = _backward_result(p, backward(p, p.dout))
                else:
                    parts = _forward_result(p, forward(p))
        except NotExpressible as e:  # not taken: counted, no traceback
            wire.write_frame(answers, b"NTKN", (str(e).splitlines()[0][:2000] if str(e) else "NotExpressible").encode("utf-8", "replace"))
            continue
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            text = f"{type(e).__name__}: {e}".splitlines()[0][:2000] if str(e) else type(e).__name__
            wire.write_frame(answers, b"FAIL", text.encode("utf-8", "replace"))
            continue
        sys.stderr.flush()
        wire.write_frame(answers, b"RSLT", wire.struct.pack("<i", 0), *parts)
