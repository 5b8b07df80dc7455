"""The Python client's own pieces, against answers worked out independently of it: bf16 rounding
against exact rational arithmetic, a PROB decoded field by field (its dropout header too), the
combined mask against the contract's rules written out key by key, the keep mask's place in a served
RSLT against the byte offsets docs/protocol.md gives, a slot appended to the call schema sent and read
by its name alone, and the replay reader against a kept regression."""
import shlex
import struct
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import attncheck
from attncheck import _protocol as wire
from attncheck import Problem, problem_from_replay, numpy_source

ROOT = Path(__file__).resolve().parents[2]


def bf16_value(bits):
    return Fraction(struct.unpack("<f", struct.pack("<I", bits << 16))[0])


def bf16_exact(x):
    """x (a float) rounded to bf16 to nearest, ties to even, by exact rational arithmetic: bit pattern."""
    if x in (float("inf"), float("-inf")):
        return 0x7F80 | (0x8000 if x < 0 else 0)
    sign = 0x8000 if np.signbit(x) else 0
    a = Fraction(abs(x))
    lo, hi = 0, 0x7F7F  # the largest finite magnitude whose value is <= a, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if bf16_value(mid) <= a else (lo, mid - 1)
    # the value above lo: the next bf16, or for the largest finite the one an exponent further (inf)
    above = bf16_value(lo + 1) if lo < 0x7F7F else 2 * bf16_value(0x7F7F) - bf16_value(0x7F7E)
    below = bf16_value(lo)
    if a - below < above - a or (a - below == above - a and lo % 2 == 0):
        return sign | lo
    return sign | (lo + 1)  # 0x7F80, inf, past the largest finite


def test_bf16_rounding_is_one_correct_rounding_from_float32_and_float64():
    rng = np.random.default_rng(7)
    # ties, values just off ties, subnormals, the overflow edge, and float64 values that a rounding
    # through float32 would round twice
    as_float = lambda bits: struct.unpack("<f", struct.pack("<I", bits))[0]
    even_tie, odd_tie = as_float(0x3F808000), as_float(0x3F818000)  # halfway: down to 0x3F80, up to 0x3F82
    # float64 values a step off a tie, which float32 rounds onto the tie: rounded twice, the tie would
    # decide, and wrongly
    off_ties = [t + d * 2.0 ** -40 for t in (even_tie, odd_tie) for d in (1, -1)]
    specials = [0.0, -0.0, 1.0, even_tie, -even_tie, odd_tie, -odd_tie, *off_ties, as_float(0x00018000),
                3.0e38, 3.39e38, 3.4e38, 1e-40, -1e-45, 1e-39, 65504.0]
    values = specials + list(rng.standard_normal(300) * 10.0 ** rng.integers(-40, 38, 300))
    for x in values:
        want = bf16_exact(x)
        got64 = int(wire.to_bf16_bits(np.array([x], np.float64))[0])
        assert got64 == want, (x, hex(got64), hex(want))
        x32 = float(np.float32(x)) if abs(x) < 3.4e38 else x
        got32 = int(wire.to_bf16_bits(np.array([x32], np.float32))[0])
        assert got32 == bf16_exact(x32), (x32, hex(got32))
    nan = int(wire.to_bf16_bits(np.array([np.nan], np.float32))[0])
    assert nan & 0x7F80 == 0x7F80 and nan & 0x7F


HEADER = struct.Struct("<iI7i3idd")  # docs/protocol.md: the PROB's first 64 bytes, field by field


def header(**fields):
    f = dict(dtype=0, flags=0, B=1, H=2, H_kv=1, Tq=3, Tk=4, dk=2, dv=1, causal=0, left=-1, right=-1, scale=0.0, softcap=0.0)
    f.update(fields)
    return HEADER.pack(*f.values())


def test_a_problem_is_decoded_field_by_field():
    q = np.arange(12, dtype="<f4")      # [1,2,3,2]
    k = np.arange(8, dtype="<f4") + 100  # [1,1,4,2]
    v = np.arange(4, dtype="<f4") + 200  # [1,1,4,1]
    allow = np.array([1, 0, 1, 1] * 3, np.uint8)
    kv_lens = np.array([3], "<i4")
    payload = header(flags=wire.HAS_ALLOW | wire.HAS_KV_LENS, causal=2, left=1, right=0, scale=0.5, softcap=30.0)
    p = Problem(payload + q.tobytes() + k.tobytes() + v.tobytes() + allow.tobytes() + kv_lens.tobytes())
    assert (p.B, p.H, p.H_kv, p.Tq, p.Tk, p.dk, p.dv) == (1, 2, 1, 3, 4, 2, 1)
    assert p.dtype == "f32" and p.causal == "lower-right" and p.window == (1, 0)
    assert p.scale == 0.5 and p.softcap == 30.0 and p.softmax_scale == 0.5
    assert p.q[0, 1, 2, 1] == 11 and p.k[0, 0, 3, 0] == 106 and p.v[0, 0, 2, 0] == 202
    assert p.kv_lens.tolist() == [3] and not p.allow[0, 0, 1]
    with pytest.raises(ValueError):
        p.q[0, 0, 0, 0] = 1  # inputs are read-only, as the plugin host's are
    with pytest.raises(ValueError, match="too short for its problem"):
        Problem(payload + q.tobytes())


def test_the_mask_combines_every_rule_as_the_contract_states_them():
    B, H, Tq, Tk = 2, 1, 3, 5
    allow = np.random.default_rng(3).integers(0, 2, (B, Tq, Tk)).astype(np.uint8)
    kv_lens = np.array([4, 2], "<i4")
    for causal, (left, right) in [(0, (-1, -1)), (1, (-1, -1)), (2, (-1, -1)), (2, (1, 0)), (0, (0, 2))]:
        payload = header(flags=wire.HAS_ALLOW | wire.HAS_KV_LENS, B=B, H=H, H_kv=H, Tq=Tq, Tk=Tk, dk=1, dv=1,
                         causal=causal, left=left, right=right)
        tensors = np.zeros(B * H * Tq + 2 * B * H * Tk, "<f4").tobytes()
        p = Problem(payload + tensors + allow.tobytes() + kv_lens.tobytes())
        mask = p.mask()
        for b in range(B):
            for i in range(Tq):
                for j in range(Tk):
                    d = i + Tk - Tq
                    want = (allow[b, i, j] != 0 and j < kv_lens[b] and not (causal == 1 and j > i) and
                            not (causal == 2 and j > d) and not (left >= 0 and j < d - left) and
                            not (right >= 0 and j > d + right))
                    assert mask[b, 0, i, j] == want, (causal, left, right, b, i, j)


def test_a_kept_regression_reads_back_bit_for_bit():
    p, prop = problem_from_replay(ROOT / "corpus/regressions/check/mutant_softmax_bf16_in_bf16.replay")
    assert p.dtype == "bf16" and prop
    assert np.all(wire.to_bf16_bits(p.q).astype(np.uint32) << 16 == p.q.view(np.uint32))  # bf16 values exactly
    source = numpy_source(p, prop)
    scope = {}
    exec(source, scope)  # the printed arrays rebuild the tensors exactly
    assert np.array_equal(scope["q"].view(np.uint32), np.asarray(p.q, np.float32).view(np.uint32))
    assert np.array_equal(scope["mask"], p.mask())


def test_the_problem_the_kernel_failed_on_is_what_a_replay_pastes(tmp_path):
    kept = (ROOT / "corpus/regressions/check/mutant_softmax_bf16_in_bf16.replay").read_text()
    drawn, _ = problem_from_replay(ROOT / "corpus/regressions/check/mutant_softmax_bf16_in_bf16.replay")
    case = kept[kept.index("case "):kept.index("end\n") + 4].splitlines()
    poisoned = [" ".join(["v", "7f80"] + line.split()[2:]) if line.startswith("v ") else line for line in case]
    path = tmp_path / "poisoned.replay"
    path.write_text(kept + "".join(f"failed-call {line}\n" for line in poisoned))
    p, prop = problem_from_replay(path)
    assert prop  # the property, still read from the file
    assert np.isinf(p.v.reshape(-1)[0]) and not np.isinf(drawn.v.reshape(-1)[0])
    assert np.array_equal(p.v.reshape(-1)[1:], drawn.v.reshape(-1)[1:]) and np.array_equal(p.q, drawn.q)


def test_unknown_capabilities_are_named():
    with pytest.raises(ValueError, match="unknown capability 'flash'; the names are f32, f64"):
        wire.capability_bits({"f32", "flash"})


def _forward_of(module):
    def forward(q, k, v):
        return v
    forward.__module__, forward.__qualname__ = module, "forward"
    return forward


def test_two_modules_forward_keep_a_replay_file_each():
    """Two tests whose functions are both `forward` overwrote one attncheck-forward.replay (issue 24)."""
    from attncheck._check import replay_name
    assert replay_name(_forward_of("tests.test_gqa")) == "attncheck-tests.test_gqa.forward.replay"
    assert replay_name(_forward_of("tests.test_gqa")) != replay_name(_forward_of("tests.test_window"))


DROPOUT_HEADER = struct.Struct("<dQ")  # docs/protocol.md: p (f64), then seed (u64), at offset 64


def test_a_prob_with_dropout_carries_its_rate_and_seed_before_the_buffers():
    q = np.arange(12, dtype="<f4")       # [1,2,3,2]
    k = np.arange(8, dtype="<f4") + 100  # [1,1,4,2]
    v = np.arange(4, dtype="<f4") + 200  # [1,1,4,1]
    buffers = q.tobytes() + k.tobytes() + v.tobytes()
    seed = 2 ** 64 - 3  # the seed is unsigned: its top bit survives
    payload = header(flags=wire.HAS_DROPOUT | wire.WANT_KEEP) + DROPOUT_HEADER.pack(0.375, seed) + buffers
    assert len(payload) == 64 + 16 + 4 * (12 + 8 + 4)
    p = Problem(payload)
    assert p.dropout_p == 0.375 and p.dropout_seed == seed and p.want_keep and not p.want_lse
    assert p.q[0, 1, 2, 1] == 11 and p.k[0, 0, 3, 0] == 106 and p.v[0, 0, 2, 0] == 202  # read after the 16 bytes
    with pytest.raises(ValueError, match="too short for its problem"):
        Problem(payload[:-1])
    with pytest.raises(ValueError, match="too short for its problem"):
        Problem(header(flags=wire.HAS_DROPOUT) + DROPOUT_HEADER.pack(0.375, seed)[:10])
    # without the flag there are no 16 bytes, and no dropout
    plain = Problem(header() + buffers)
    assert (plain.dropout_p, plain.dropout_seed, plain.want_keep) == (0.0, 0, False)
    with pytest.raises(ValueError, match="a PROB of 176 bytes for a problem of 160"):
        Problem(header() + DROPOUT_HEADER.pack(0.375, seed) + buffers)  # 16 bytes the flags do not announce


def test_the_payload_writer_puts_the_dropout_header_at_64():
    dims = (1, 2, 1, 3, 4, 2, 1)
    tensors = dict(q=bytes(4 * 12), k=bytes(4 * 8), v=bytes(4 * 4))
    payload = wire.problem_payload("f32", dims, dropout=(0.5, 77), want_keep=True, **tensors)
    flags = struct.unpack_from("<I", payload, 4)[0]
    assert flags == wire.FLAGS["dropout"] | wire.FLAGS["dropout_mask"] == 32 | 64
    assert payload[64:80] == DROPOUT_HEADER.pack(0.5, 77) and len(payload) == 64 + 16 + 4 * 24
    assert len(wire.problem_payload("f32", dims, **tensors)) == 64 + 4 * 24
    with pytest.raises(ValueError, match="with dropout only"):
        wire.problem_payload("f32", dims, want_keep=True, **tensors)


def test_the_paged_header_and_pools_are_read_with_no_edit_of_the_client():
    # Paged KV (issue 39): a header of three dims appended to protocol.hpp's kHeaders and a slot
    # appended to call_slots.def, both brought by the paged_kv flag; _features.py regenerated, the
    # client reads them with no edit of its code: NB, BS and BPS as attributes, k and v as pools
    # [NB, H_kv, BS, d] (their pooled shapes), the block table [B, BPS] after them.
    dims = (1, 2, 1, 3, 4, 2, 1)  # B, H, H_kv, Tq, Tk, dk, dv
    q, k, v = np.arange(12, dtype="<f4"), np.arange(7 * 16 * 2, dtype="<f4"), np.arange(7 * 16, dtype="<f4")
    table = np.array([[4, 0, 6]], "<i4")
    fields = dict(zip(wire.PROBLEM_DIMS, dims), flags=wire.HAS_DROPOUT | wire.FLAGS["paged_kv"], window_left=-1,
                  window_right=-1, dropout_p=0.25, dropout_seed=9, NB=7, BS=16, BPS=3)
    headers = wire.write_headers(fields)
    assert headers[80:] == struct.pack("<3i4x", 7, 16, 3) and len(headers) == 64 + 16 + 16
    p = Problem(headers + q.tobytes() + k.tobytes() + v.tobytes() + table.tobytes())
    assert (p.NB, p.BS, p.BPS, p.dropout_p, p.dropout_seed) == (7, 16, 3, 0.25, 9)
    assert p.k.shape == (7, 1, 16, 2) and p.v.shape == (7, 1, 16, 1) and p.k[4, 0, 3, 1] == k[(4 * 16 + 3) * 2 + 1]
    assert p.block_table.tolist() == [[4, 0, 6]]
    plain = Problem(wire.problem_payload("f32", dims, q=q.tobytes(), k=bytes(4 * 8), v=bytes(4 * 4)))
    assert (plain.NB, plain.BS, plain.dropout_p, plain.block_table) == (0, 0, 0.0, None)  # a header not sent reads as 0


def test_varlen_packed_tensors_and_cu_seqlens_are_read_in_their_packed_shapes():
    # Varlen (issue 39): no header, the varlen flag alone; q, k, v in their packed shapes ([H, Tq, dk],
    # [H_kv, Tk, d], Tq and Tk the totals), then cu_seqlens_q and cu_seqlens_k [B + 1] after them.
    dims = (2, 2, 1, 3, 5, 2, 1)  # B 2 sequences, H, H_kv, Tq = 3 queries and Tk = 5 keys in all, dk, dv
    q, k, v = np.arange(2 * 3 * 2, dtype="<f4"), np.arange(5 * 2, dtype="<f4"), np.arange(5, dtype="<f4")
    cu_q, cu_k = np.array([0, 1, 3], "<i4"), np.array([0, 4, 5], "<i4")
    payload = wire.problem_payload("f32", dims, q=q.tobytes(), k=k.tobytes(), v=v.tobytes(), cu_seqlens_q=cu_q.tobytes(),
                                   cu_seqlens_k=cu_k.tobytes())
    p = Problem(payload)
    assert p.S == 3 and p.q.shape == (2, 3, 2) and p.k.shape == (1, 5, 2) and p.v.shape == (1, 5, 1)
    assert p.q[1, 2, 1] == q[(3 + 2) * 2 + 1]
    assert p.cu_seqlens_q.tolist() == [0, 1, 3] and p.cu_seqlens_k.tolist() == [0, 4, 5]
    assert wire.slot_shape(next(s for s in wire.SLOTS if s["name"] == "out"), vars(p)) == (2, 3, 1)
    # p.mask(): the packed rows' mask [1, H, Tq, Tk], each sequence's block at its own lengths (sequence
    # 0: query row 0, keys 0..3; sequence 1: query rows 1 and 2, key 4), written out by hand.
    def mask(causal):
        packed = Problem(wire.problem_payload("f32", dims, causal, q=q.tobytes(), k=k.tobytes(), v=v.tobytes(),
                                              cu_seqlens_q=cu_q.tobytes(), cu_seqlens_k=cu_k.tobytes())).mask()
        assert packed.shape == (1, 2, 3, 5) and (packed[0, 1] == packed[0, 0]).all()
        return packed[0, 0].astype(int).tolist()
    assert mask("none") == [[1, 1, 1, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1]]
    assert mask("lower-right") == [[1, 1, 1, 1, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1]]  # sequence 1: j <= i - 1
    assert mask("upper-left") == [[1, 0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1]]
    with pytest.raises(ValueError):  # bytes for [B, H, Tq, dk] where the packed [H, Tq, dk] belongs
        Problem(wire.problem_payload("f32", dims, q=np.arange(24, dtype="<f4").tobytes(), k=k.tobytes(), v=v.tobytes(),
                                     cu_seqlens_q=cu_q.tobytes(), cu_seqlens_k=cu_k.tobytes()))


def test_a_slot_appended_to_the_schema_is_sent_and_read_with_no_other_edit():
    # The sinks, a per-head float32 vector brought by a feature of its own, a row appended to
    # call_slots.def and so to the regenerated _features.py, with no edit of the client's code: the
    # payload writer takes it by its name, after the rows before it, its feature's flag set, float32
    # in every format, and Problem reads it back as the attribute of that name.
    sinks = [s for s in wire.SLOTS if s["name"] == "sinks"]
    assert len(sinks) == 1 and sinks[0]["element"] == "f32"
    dims = (1, 2, 1, 1, 1, 1, 1)
    for dtype, storage in (("f32", "<f4"), ("f64", "<f8")):
        q, k, v = (bytes(np.dtype(storage).itemsize * n) for n in (2, 1, 1))
        bias, values = np.array([7, 8], storage).tobytes(), np.array([0.5, -2], "<f4")
        payload = wire.problem_payload(dtype, dims, q=q, k=k, v=v, bias=bias, sinks=values.tobytes())
        assert struct.unpack_from("<I", payload, 4)[0] == wire.HAS_BIAS | wire.FLAGS["sinks"]
        assert payload[64:] == q + k + v + bias + values.tobytes()
        p = Problem(payload)
        assert p.sinks.dtype == np.float32 and p.sinks.tolist() == [0.5, -2.0]
        assert p.bias.tolist() == [[[[7.0]], [[8.0]]]]
        assert Problem(wire.problem_payload(dtype, dims, q=q, k=k, v=v)).sinks is None


# A served function that returns what it is asked for, each value telling where it came from: out the
# rate, lse the seed, keep (i + j + h) % 2 (or with `bad` in the module's argument, a keep it must not send).
SERVED = '''
import sys
import numpy as np
import attncheck
bad = sys.argv[1]
def forward(p):
    out = np.full((p.B, p.H, p.Tq, p.dv), p.dropout_p, np.float32)
    lse = np.full((p.B, p.H, p.Tq), p.dropout_seed % 1000, np.float32)
    h, i, j = np.ix_(range(p.H), range(p.Tq), range(p.Tk))
    keep = np.broadcast_to((h + i + j) % 2 == 1, (p.B, p.H, p.Tq, p.Tk))
    if bad == "missing":
        return (out, lse) if p.want_lse else out
    if bad == "two":
        keep = keep * 2
    return (out, *([lse] if p.want_lse else []), *([keep] if p.want_keep else []))
attncheck.serve(forward, capabilities={"f32", "lse", "dropout", "dropout_mask"})
'''


def serve_command(bad="none"):
    return f"env PYTHONPATH={shlex.quote(str(ROOT / 'python'))} {shlex.quote(sys.executable)} -c {shlex.quote(SERVED)} {bad}"


def exchange(command, payload):
    """The HELO's capabilities and the answer (tag, payload) to one PROB."""
    child = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tag, hello = wire.read_frame(child.stdout)
        assert tag == b"HELO"
        wire.write_frame(child.stdin, b"PROB", payload)
        return struct.unpack("<3I", hello)[2], wire.read_frame(child.stdout)
    finally:
        child.stdin.close()
        child.wait(30)


def test_the_keep_mask_comes_between_out_and_lse_in_the_rslt():
    B, H, Tq, Tk, dk, dv = 1, 2, 3, 4, 2, 1
    dims = (B, H, H, Tq, Tk, dk, dv)
    tensors = dict(q=bytes(4 * B * H * Tq * dk), k=bytes(4 * B * H * Tk * dk), v=bytes(4 * B * H * Tk * dv))
    want = np.array([[[(h + i + j) % 2 for j in range(Tk)] for i in range(Tq)] for h in range(H)], np.uint8)
    for lse in (False, True):
        payload = wire.problem_payload("f32", dims, dropout=(0.25, 12345), want_keep=True, want_lse=lse, **tensors)
        bits, (tag, body) = exchange(serve_command(), payload)
        assert bits == 1 | 2048 | 8192 | 16384  # f32, lse, dropout, dropout_mask
        out_bytes, keep_bytes = 4 * B * H * Tq * dv, B * H * Tq * Tk
        assert tag == b"RSLT" and len(body) == 4 + out_bytes + keep_bytes + (4 * B * H * Tq if lse else 0)
        assert struct.unpack_from("<i", body)[0] == 0
        assert np.all(np.frombuffer(body, "<f4", B * H * Tq * dv, 4) == 0.25)
        assert np.array_equal(np.frombuffer(body, np.uint8, keep_bytes, 4 + out_bytes).reshape(H, Tq, Tk), want)
        if lse:
            assert np.all(np.frombuffer(body, "<f4", B * H * Tq, 4 + out_bytes + keep_bytes) == 345)
    # without the keep mask asked, dropout alone: out (and lse) as before
    _, (tag, body) = exchange(serve_command(), wire.problem_payload("f32", dims, dropout=(0.25, 1), **tensors))
    assert tag == b"RSLT" and len(body) == 4 + 4 * B * H * Tq * dv


def test_a_forward_that_returns_no_keep_mask_or_a_wrong_one_fails_the_call():
    dims = (1, 1, 1, 2, 3, 1, 1)
    tensors = dict(q=bytes(4 * 2), k=bytes(4 * 3), v=bytes(4 * 3))
    for lse in (False, True):
        payload = wire.problem_payload("f32", dims, dropout=(0.5, 3), want_keep=True, want_lse=lse, **tensors)
        _, (tag, text) = exchange(serve_command("missing"), payload)
        asked = "(out, lse, keep) (capability 'lse', 'dropout_mask')" if lse else "(out, keep) (capability 'dropout_mask')"
        assert tag == b"FAIL" and text.decode().endswith(f"but the problem asks for {asked}"), text
    _, (tag, text) = exchange(serve_command("two"), wire.problem_payload("f32", dims, dropout=(0.5, 3), want_keep=True,
                                                                         **tensors))
    assert tag == b"FAIL" and text == b"ValueError: returned keep with values other than 0 and 1: [2]"


def test_run_command_reads_the_keep_mask_back():
    from attncheck import run_command
    q, k, v = np.zeros((1, 2, 3, 2), np.float32), np.zeros((1, 2, 4, 2), np.float32), np.zeros((1, 2, 4, 1), np.float32)
    out, lse, keep = run_command(serve_command(), dtype="f32", q=q, k=k, v=v, want_lse=True, dropout_p=0.125,
                                 dropout_seed=2001, want_keep=True)
    assert np.all(out == 0.125) and np.all(lse == 1) and keep.shape == (1, 2, 3, 4)
    assert keep[0, 1, 2].tolist() == [1, 0, 1, 0]  # (h + i + j) % 2 at h 1, i 2


def test_a_replay_with_dropout_carries_it(tmp_path):
    kept = (ROOT / "corpus/regressions/check/mutant_softmax_bf16_in_bf16.replay").read_text()
    path = tmp_path / "dropout.replay"
    path.write_text(kept.replace("\nmix ", "\ndropout 0x1.8p-2 18446744073709551615\nmix ", 1))
    p, _ = problem_from_replay(path)
    assert p.dropout_p == 0.375 and p.dropout_seed == 2 ** 64 - 1 and not p.want_keep
    assert "dropout_p = 0.375\ndropout_seed = 18446744073709551615" in numpy_source(p)


NARROW = r'''
import numpy as np
import attncheck
def forward(p):
    if p.Tq == 7:
        raise attncheck.NotExpressible("Tq 7: not this library's: more words")
    return np.zeros((p.B, p.H, p.Tq, p.dv), np.float32)
attncheck.serve(forward, capabilities={"f32", "causal"}, restrictions=["causal", "square"],
                limits={"head_dims": [64, 128], "max_Tq": 512})
'''


def test_a_narrow_function_says_its_domain_and_a_call_it_cannot_take_is_not_taken():
    command = f"env PYTHONPATH={shlex.quote(str(ROOT / 'python'))} {shlex.quote(sys.executable)} -c {shlex.quote(NARROW)}"
    child = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tag, hello = wire.read_frame(child.stdout)
        assert tag == b"HELO" and len(hello) == 108  # docs/protocol.md: 12 bytes, then the domain
        protocol, abi, capabilities, restrictions, size, *limits = struct.unpack("<3IIi6i16i", hello)
        assert (protocol, abi, capabilities) == (1, 2, 1 | 32)
        assert restrictions == 1 | 8 | 256  # causal, square, and the limits given: within_limits
        assert size == 92 and limits[:6] == [0, 0, 512, 0, 0, 0] and limits[6:9] == [64, 128, 0]
        for Tq, want in ((7, b"NTKN"), (3, b"RSLT")):
            dims = (1, 1, 1, Tq, Tq, 64, 64)
            payload = wire.problem_payload("f32", dims, "lower-right", q=bytes(4 * Tq * 64), k=bytes(4 * Tq * 64),
                                           v=bytes(4 * Tq * 64))
            wire.write_frame(child.stdin, b"PROB", payload)
            tag, body = wire.read_frame(child.stdout)
            assert tag == want, (tag, body)
            if want == b"NTKN":
                assert body == b"Tq 7: not this library's: more words"
    finally:
        child.stdin.close()
        child.wait(30)


def test_restrictions_and_limits_are_checked_by_name():
    assert wire.hello_payload(2, 1) == struct.pack("<3I", 1, 2, 1)  # no domain: the 12 bytes of old
    with pytest.raises(ValueError, match="unknown restriction 'causal_only'; the names are causal, lower_right"):
        wire.restriction_bits(["causal_only"])
    with pytest.raises(ValueError, match="unknown limit 'max_Q'"):
        wire.limit_values({"max_Q": 3})
    with pytest.raises(ValueError, match="limit head_dims: a whole number from 1"):
        wire.limit_values({"head_dims": [64, 0]})
    with pytest.raises(ValueError, match="at most 16 widths"):
        wire.limit_values({"head_dims": list(range(1, 18))})
    assert attncheck.RESTRICTIONS["lower_right"] == 2 and issubclass(attncheck.NotExpressible, ValueError)


# Children that hang, each at one point of the exchange, writing the pids that must not outlive it:
# before its HELO; after it, never reading the problem (larger than a pipe holds); and in its call,
# with a grandchild of its own in its process group.
HANGS = {
    "before its HELO": "import os, sys, time\nprint(os.getpid(), file=open(sys.argv[1], 'w'))\ntime.sleep(3600)\n",
    "reading no problem": '''
import os, struct, sys, time
print(os.getpid(), file=open(sys.argv[1], "w"))
sys.stdout.buffer.write(b"HELO" + struct.pack("<I3I", 12, 1, 2, 1))
sys.stdout.flush()
time.sleep(3600)
''',
    "in its call": '''
import os, subprocess, sys, time
import attncheck
def forward(p):
    sleeper = subprocess.Popen(["sleep", "3600"])
    print(os.getpid(), sleeper.pid, file=open(sys.argv[1], "w"))
    time.sleep(3600)
attncheck.serve(forward, capabilities={"f32"})
''',
}


def running(pid):
    """Whether pid runs (a zombie that no one has reaped yet runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("hang", HANGS)
def test_run_command_gives_up_on_a_child_that_hangs_and_kills_its_process_group(hang, tmp_path):
    from attncheck import run_command
    import signal
    import time

    def stuck(*_):
        raise AssertionError("run_command was still waiting after 10 s")
    signal.signal(signal.SIGALRM, stuck)  # a run_command that waits forever fails here rather than hanging pytest
    signal.alarm(10)
    pids = tmp_path / "pids"
    command = (f"env PYTHONPATH={shlex.quote(str(ROOT / 'python'))} {shlex.quote(sys.executable)} "
               f"-c {shlex.quote(HANGS[hang])} {shlex.quote(str(pids))}")
    q = k = v = np.zeros((1, 1, 256, 128), np.float32)  # 128 KiB each: more than a pipe holds unread
    started = time.monotonic()
    try:
        with pytest.raises(AssertionError, match="the command gave no answer within 2 s"):
            run_command(command, dtype="f32", q=q, k=k, v=v, timeout=2)
    finally:
        signal.alarm(0)
    assert time.monotonic() - started < 4
    written = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 2  # killed: each gone as soon as the kernel has delivered the signal
    while any(running(pid) for pid in written) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in written if running(pid)]


def test_run_command_within_its_timeout_answers():
    from attncheck import run_command
    q, k, v = np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 3, 2), np.float32), np.zeros((1, 1, 3, 1), np.float32)
    out = run_command(serve_command(), dtype="f32", q=q, k=k, v=v, dropout_p=0.5, timeout=10)
    assert out.shape == (1, 1, 2, 1) and np.all(out == 0.5)
