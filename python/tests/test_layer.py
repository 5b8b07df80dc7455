"""The client's layer call (docs/protocol.md, "A layer call"): a layer PROB decoded field by field
against the byte offsets the spec gives, the reference against a case worked out by hand, and a
served NumPy layer's RSLT frames (out, the weights in float32 or float64, FAIL for a wrong answer)."""
import math
import shlex
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layer_reference import layer, random_layer, reference  # noqa: E402
from attncheck import _protocol as wire  # noqa: E402
from attncheck import Layer, Problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_layer_bits_are_the_feature_tables():
    assert (wire.HAS_LAYER, wire.WANT_WEIGHTS) == (128, 256)
    assert (wire.SELF, wire.B_Q, wire.B_K, wire.B_V, wire.B_O) == (1, 2, 4, 8, 16)
    assert [h["size"] for h in wire.HEADERS if h["flag"] == "mha"] == [16]
    assert wire.CAPABILITIES["mha"] == 1 << 15 and wire.CAPABILITIES["mha_weights"] == 1 << 16


def test_a_cross_attention_layer_is_decoded_field_by_field_at_the_specs_offsets():
    B, H, H_kv, Tq, Tk, dk, dv, D = 1, 2, 1, 2, 3, 2, 1, 3
    x_q = np.arange(B * Tq * D, dtype="<f4")             # [1,2,3]
    x_kv = np.arange(B * Tk * D, dtype="<f4") + 100      # [1,3,3]
    w_q = np.arange(D * H * dk, dtype="<f4") + 200       # [3,4]
    w_k = np.arange(D * H_kv * dk, dtype="<f4") + 300    # [3,2]
    w_v = np.arange(D * H_kv * dv, dtype="<f4") + 400    # [3,1]
    b_k = np.array([7, 8], "<f4")
    w_o = np.arange(H * dv * D, dtype="<f4") + 500       # [2,3]
    b_o = np.array([1, 2, 3], "<f4")
    allow = np.array([1, 0, 1, 1, 1, 0], np.uint8)
    kv_lens = np.array([2], "<i4")
    payload = wire.layer_payload("f32", (B, H, H_kv, Tq, Tk, dk, dv), D, "lower-right", (1, 0), 0.5,
                                 x_q=x_q.tobytes(), x_kv=x_kv.tobytes(), w_q=w_q.tobytes(), w_k=w_k.tobytes(),
                                 w_v=w_v.tobytes(), w_o=w_o.tobytes(), b_k=b_k.tobytes(), b_o=b_o.tobytes(),
                                 allow=allow.tobytes(), kv_lens=kv_lens.tobytes(), want_weights=True)
    # the header as docs/protocol.md lays it out, byte by byte
    assert struct.unpack_from("<iI7i", payload, 0) == (0, 1 | 2 | 128 | 256, B, H, H_kv, Tq, Tk, dk, dv)
    assert struct.unpack_from("<i2idd", payload, 36) == (2, 1, 0, 0.5, 0.0)
    assert struct.unpack_from("<iIQ", payload, 64) == (D, 4 | 16, 0)  # cross-attention: no part 1
    assert payload[80:86] == allow.tobytes() and payload[86:90] == kv_lens.tobytes()
    assert payload[90:90 + 4 * 6] == x_q.tobytes()
    m = Layer(payload)
    assert (m.B, m.H, m.H_kv, m.Tq, m.Tk, m.dk, m.dv, m.D) == (B, H, H_kv, Tq, Tk, dk, dv, D)
    assert m.dtype == "f32" and m.causal == "lower-right" and m.window == (1, 0) and m.scale == 0.5
    assert m.softmax_scale == 0.5 and m.want_weights and not m.self_attention
    assert m.x_q[0, 1, 2] == 5 and m.x_kv[0, 2, 0] == 106 and m.x_kv is not m.x_q
    assert m.w_q[2, 3] == 211 and m.w_k[1, 0] == 302 and m.w_v[2, 0] == 402 and m.w_o[1, 2] == 505
    assert m.b_q is None and m.b_v is None and m.b_k.tolist() == [7, 8] and m.b_o.tolist() == [1, 2, 3]
    assert m.allow.tolist() == [[[True, False, True], [True, True, False]]] and m.kv_lens.tolist() == [2]
    with pytest.raises(ValueError):
        m.w_q[0, 0] = 1  # read-only, as the checker's inputs are
    # the mask is Problem's: allow, key lengths, lower-right causal and the window, over both heads
    assert m.mask().shape == (1, 2, 2, 3)
    assert m.mask()[0, 1].tolist() == [[True, False, False], [False, True, False]]


def test_self_attention_sends_x_q_once_and_x_kv_is_the_same_array():
    rng = np.random.default_rng(1)
    m = random_layer(rng, B=1, H=2, Tq=3, D=4, biases="")
    assert m.self_attention and m.x_kv is m.x_q and m.Tk == 3
    assert (m.b_q, m.b_k, m.b_v, m.b_o) == (None, None, None, None) and m.scale is None
    assert m.softmax_scale == 1 / math.sqrt(2)
    # 80 bytes of headers, then x_q [1,3,4], w_q, w_k, w_v [4,4] and w_o [4,4]: 12 + 4 * 16 floats
    payload = wire.layer_payload("f32", (1, 2, 2, 3, 3, 2, 2), 4, x_q=bytes(48), w_q=bytes(64), w_k=bytes(64),
                                 w_v=bytes(64), w_o=bytes(64))
    assert len(payload) == 80 + 48 + 4 * 64 and struct.unpack_from("<iIQ", payload, 64) == (4, 1, 0)
    assert struct.unpack_from("<I", payload, 4)[0] == 128


def test_f64_bf16_and_f16_layers_decode_in_their_formats():
    rng = np.random.default_rng(2)
    for dtype, kind in (("f64", np.float64), ("bf16", np.float32), ("f16", np.float16)):
        m = random_layer(rng, dtype=dtype)
        assert m.dtype == dtype and m.x_q.dtype == kind and m.w_o.dtype == kind and m.b_o.dtype == kind
    m = random_layer(rng, dtype="bf16")
    assert np.all(m.x_q.view(np.uint32) & 0xFFFF == 0)  # bf16 values, exactly


def test_parse_errors_are_one_line_value_errors():
    good = wire.layer_payload("f32", (1, 1, 1, 1, 1, 1, 1), 1, x_q=bytes(4), w_q=bytes(4), w_k=bytes(4),
                              w_v=bytes(4), w_o=bytes(4))
    Layer(good)
    cases = {
        "too short for its problem": good[:-1],
        "for a problem of": good + bytes(4),
        "shorter than its headers .80 bytes.": good[:70],
        "never carries bias, lse, backward": good[:4] + struct.pack("<I", 128 | 8) + good[8:],
        "without the layer flag": good[:4] + struct.pack("<I", 0) + good[8:],
        "softcap": good[:56] + struct.pack("<d", 30.0) + good[64:],
        "ends in 5, not 0": good[:72] + struct.pack("<Q", 5) + good[80:],
        "Tq 1 != Tk 2": good[:24] + struct.pack("<i", 2) + good[28:],  # self-attention with Tk 2
        "unknown parts bits": good[:68] + struct.pack("<I", 1 | 64) + good[72:],
        "dtype code 7": struct.pack("<i", 7) + good[4:],
    }
    for words, payload in cases.items():
        with pytest.raises(ValueError, match=words) as error:
            Layer(payload)
        assert "\n" not in str(error.value)


def test_the_reference_on_a_case_worked_out_by_hand():
    # D 2, H 1, dk = dv = 2, identity projections: Q = K = V = x; two keys, the second masked for query 0
    x = np.array([[[1.0, 0.0], [0.0, 2.0]]])
    eye = np.eye(2)
    m = layer(x, eye, eye, eye, eye, H=1, b_o=[10, 20], dtype="f64", allow=[[[1, 0], [1, 1]]], want_weights=True)
    out, weights = reference(m)
    # query 1: scores (0, 4) / sqrt(2); weights (1, w) / (1 + w)
    w = math.exp(4 / math.sqrt(2))
    assert weights[0, 0].tolist() == [[1, 0], [pytest.approx(1 / (1 + w)), pytest.approx(w / (1 + w))]]
    np.testing.assert_allclose(out[0], [[11, 20], [10 + 1 / (1 + w), 20 + 2 * w / (1 + w)]])
    # a row with no permitted key: head 0, out b_o; weights 0 (NaN under --empty-rows nan)
    m = layer(x, eye, eye, eye, eye, H=1, b_o=[10, 20], dtype="f64", allow=[[[0, 0], [1, 1]]])
    out, weights = reference(m)
    assert out[0, 0].tolist() == [10, 20] and weights[0, 0, 0].tolist() == [0, 0]
    assert np.isnan(reference(m, empty_rows="nan")[0][0, 0]).all()


def test_the_reference_groups_kv_heads_contiguously():
    # H 2, H_kv 1: both query heads read the one KV head; with one key each head is V's row
    x = np.array([[[1.0, 2.0]]])
    m = layer(x, np.eye(2), np.ones((2, 1)), np.array([[1.0], [0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]), H=2,
              H_kv=1, dtype="f64")
    out, _ = reference(m)
    assert out.tolist() == [[[1.0, 1.0]]]


# A served NumPy layer (the reference itself, in the problem's format), and broken ones: `bad` in the
# command's argument says how.
SERVED = '''
import sys
sys.path.insert(0, {tests!r})
import numpy as np
import attncheck
from layer_reference import reference
bad = sys.argv[1]
def layer(m):
    out, weights = reference(m)
    if bad == "shape":
        return out[:, :, :-1], weights
    if bad == "missing":
        return out
    if bad == "weights_shape":
        return out, weights[:, :1]
    return (out, weights) if m.want_weights else out
def forward(p):
    return np.zeros((p.B, p.H, p.Tq, p.dv))
caps = {{"f32", "f64", "allow", "causal", "kv_lens", "gqa", "window", "mha", "mha_weights"}}
if bad == "with_forward":
    attncheck.serve(forward, capabilities=caps, layer=layer)
elif bad == "default":
    attncheck.serve(layer=layer)
else:
    attncheck.serve(layer=layer, capabilities=caps)
'''


def serve_command(bad="none"):
    code = SERVED.format(tests=str(Path(__file__).resolve().parent))
    return f"env PYTHONPATH={shlex.quote(str(ROOT / 'python'))} {shlex.quote(sys.executable)} -c {shlex.quote(code)} {bad}"


def exchange(command, payloads):
    """The HELO's capabilities and the answers (tag, payload) to each PROB."""
    child = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    try:
        tag, hello = wire.read_frame(child.stdout)
        assert tag == b"HELO"
        answers = []
        for payload in payloads:
            wire.write_frame(child.stdin, b"PROB", payload)
            answers.append(wire.read_frame(child.stdout))
        return struct.unpack("<3I", hello)[2], answers
    finally:
        child.stdin.close()
        child.wait(30)


def test_a_served_layer_answers_out_then_weights_in_float32_or_float64():
    rng = np.random.default_rng(5)
    cases = []
    for dtype in ("f32", "f64"):
        for want in (False, True):
            for cross in (False, True):
                options = dict(B=2, H=2, H_kv=1, Tq=3, Tk=4, D=4, dk=3, dv=2, cross=cross, dtype=dtype,
                               causal="lower-right", kv_lens=[4 if cross else 3, 2], want_weights=want)
                cases.append((dtype, want, random_layer(rng, **options), options))
    bits, answers = exchange(serve_command(), [m.payload for _, _, m, _ in cases])
    assert bits == (1 | 2 | 16 | 32 | 64 | 128 | 256) | (1 << 15) | (1 << 16) | wire.LAYER_ONLY
    for (dtype, want, m, _), (tag, body) in zip(cases, answers):
        assert tag == b"RSLT", body
        B, Tq, D, H, Tk = m.B, m.Tq, m.D, m.H, m.Tk
        size = 4 if dtype == "f32" else 8
        assert struct.unpack_from("<i", body)[0] == 0
        assert len(body) == 4 + size * B * Tq * D + (size * B * H * Tq * Tk if want else 0)
        out, weights = reference(m)
        storage = "<f4" if dtype == "f32" else "<f8"
        got = np.frombuffer(body, storage, B * Tq * D, 4).reshape(B, Tq, D)
        np.testing.assert_array_equal(got, out.astype(storage))
        if want:
            got_w = np.frombuffer(body, storage, B * H * Tq * Tk, 4 + size * B * Tq * D).reshape(B, H, Tq, Tk)
            np.testing.assert_array_equal(got_w, weights.astype(storage))


def test_a_wrong_shape_or_missing_weights_is_a_fail_frame():
    rng = np.random.default_rng(9)
    options = dict(B=1, H=2, Tq=2, D=4, want_weights=True)
    payload = random_layer(rng, **options).payload
    _, [(tag, text)] = exchange(serve_command("shape"), [payload])
    assert tag == b"FAIL" and text == b"ValueError: returned out of shape (1, 2, 3); the problem's is (1, 2, 4)"
    _, [(tag, text)] = exchange(serve_command("missing"), [payload])
    assert tag == b"FAIL" and text.decode().endswith("asks for (out, weights) (capability 'mha_weights')"), text
    _, [(tag, text)] = exchange(serve_command("weights_shape"), [payload])
    assert tag == b"FAIL" and b"returned weights of shape (1, 1, 2, 2)" in text
    # without the weights asked, out alone is the answer, and a (out, weights) tuple gives its out
    _, [(tag, body)] = exchange(serve_command("missing"), [random_layer(rng, **dict(options, want_weights=False)).payload])
    assert tag == b"RSLT" and len(body) == 4 + 4 * 1 * 2 * 4


def test_a_layer_alone_claims_mha_and_refuses_an_attention_call():
    dims = (1, 1, 1, 1, 1, 1, 1)
    forward_call = wire.problem_payload("f32", dims, q=bytes(4), k=bytes(4), v=bytes(4))
    layer_call = random_layer(np.random.default_rng(0), B=1, H=1, Tq=1, D=1).payload
    bits, [(tag, text), (tag2, _)] = exchange(serve_command("default"), [forward_call, layer_call])
    assert bits == 1 | (1 << 15) | wire.LAYER_ONLY  # f32 and mha, the defaults of a layer without capabilities; no forward
    assert tag == b"FAIL" and text == b"TypeError: an attention call, but serve() was given a layer function alone"
    assert tag2 == b"RSLT"
    # with a forward as well, each call goes to its own function
    _, [(tag, body), (tag2, _)] = exchange(serve_command("with_forward"), [forward_call, layer_call])
    assert tag == b"RSLT" and len(body) == 8 and tag2 == b"RSLT"


def test_serve_refuses_capabilities_it_cannot_answer():
    import attncheck
    with pytest.raises(ValueError, match="need serve"):
        attncheck.serve(lambda p: None, capabilities={"f32", "mha"})
    with pytest.raises(ValueError, match="needs a forward function, a layer function"):
        attncheck.serve()


def test_a_forward_problem_is_still_a_problem():
    payload = wire.problem_payload("f32", (1, 1, 1, 1, 1, 1, 1), q=bytes(4), k=bytes(4), v=bytes(4))
    assert Problem(payload).dv == 1
    with pytest.raises(ValueError, match="without the layer flag"):
        Layer(payload + bytes(16))
