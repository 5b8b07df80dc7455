"""The flex_attention adapter's paged calls (python/attncheck/adapters/flex_attention.py, "paged KV"):
PyTorch's own PagedAttention for FlexAttention (torch.nn.attention.experimental._paged_attention)
given attncheck's pool and block table, against the adapter's dense call on the same keys, with
every slot no key fills poisoned: each page size attncheck draws (1, 2, 16, 3, 5, 7), key lengths
and causal masks, an allow mask, a bias and a soft-cap (indexed at logical keys past Tk), grouped KV
heads, dv != dk, lse, spare pages and table entries past a sequence's last page naming any page.

Run: PYTHONPATH=python $ATTNCHECK_TORCH_PYTHON -m pytest -q -p no:cacheprovider examples/flex_attention/test_paged.py
(skipped where torch has no FlexAttention or no PagedAttention).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the client, from the source tree
torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention.flex_attention")
pytest.importorskip("torch.nn.attention.experimental._paged_attention")
from attncheck import _protocol as wire  # noqa: E402
from attncheck._problem import Problem  # noqa: E402
from attncheck.adapters import NotExpressible  # noqa: E402
from attncheck.adapters import flex_attention  # noqa: E402

# its one warning on the eager path, said in the adapter's docstring
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

PAGE_SIZES = [1, 2, 16, 3, 5, 7]  # what attncheck draws (tools/include/attncheck/cases.hpp, with_paging)


@pytest.fixture(scope="module")
def flex():
    torch.set_num_threads(1)
    return flex_attention.Adapter()


def send(fields, tensors, dtype="f32"):
    """A Problem through the protocol's own payload: fields the headers' (extra_flags: WANT_LSE), tensors
    NumPy arrays by slot name (None: absent), each in its slot's storage (the format's, rounded to it)."""
    kinds = {"allow": np.uint8, "kv_lens": "<i4", "block_table": "<i4"}
    given = {name: (np.ascontiguousarray(x, kinds[name]).tobytes() if name in kinds else wire.encode(dtype, x))
             for name, x in tensors.items() if x is not None}
    flags, _, buffers = wire._inputs("forward", given)
    fields["flags"] = flags | fields.pop("extra_flags", 0)
    return Problem(wire.write_headers(fields) + buffers)


def problems(q, k, v, BS, kv_lens=None, causal="none", window=(-1, -1), scale=0.0, softcap=0.0, allow=None,
             bias=None, want_lse=False, poison=np.nan, spare=2, repeat_spares=True, seed=0, dtype="f32"):
    """(the dense Problem, the same keys paged): dense k [B,H_kv,Tk,dk] and v; paged, each sequence's
    keys in pages of BS at shuffled places in a pool of `spare` more pages, its table's entries past
    its last page naming any page (repeated ones), and every slot no key fills (past a sequence's
    length, spare pages) = poison, as attncheck's with_paging lays them out. In the dense problem a
    key past a sequence's length holds poison too (the checker's dense twin holds something there)."""
    q, k, v = (np.array(x, np.float64) for x in (q, k, v))
    B, H, Tq, dk = q.shape
    _, H_kv, Tk, dv = v.shape
    lengths = [Tk] * B if kv_lens is None else list(kv_lens)
    for b, n in enumerate(lengths):
        k[b, :, n:], v[b, :, n:] = poison, poison
    fields = dict(zip(wire.PROBLEM_DIMS, (B, H, H_kv, Tq, Tk, dk, dv)),
                  format={"f32": 0, "f64": 1, "f16": 2, "bf16": 3}[dtype],
                  causal={"none": 0, "upper-left": 1, "lower-right": 2, "kv-end": 3}[causal],
                  window_left=window[0], window_right=window[1], scale=scale, softcap=softcap,
                  extra_flags=wire.WANT_LSE if want_lse else 0)
    common = dict(q=q, allow=allow, kv_lens=None if kv_lens is None else np.asarray(kv_lens), bias=bias)
    dense = send(dict(fields), dict(common, k=k, v=v), dtype)
    rng = np.random.default_rng(seed)
    needed = [-(-n // BS) for n in lengths]
    BPS = -(-Tk // BS) + 1  # a spare entry past every sequence's last page
    NB = max(1, sum(needed) + spare)
    place = rng.permutation(NB).astype(np.int32)
    table = np.zeros((B, BPS), np.int32)
    at = 0
    for b in range(B):
        table[b, :needed[b]] = place[at:at + needed[b]]
        at += needed[b]
        table[b, needed[b]:] = rng.integers(0, NB, BPS - needed[b]) if repeat_spares else place[0]
    kp = np.full((NB, H_kv, BS, dk), poison)
    vp = np.full((NB, H_kv, BS, dv), poison)
    for b in range(B):
        for j in range(lengths[b]):
            kp[table[b, j // BS], :, j % BS] = k[b, :, j]
            vp[table[b, j // BS], :, j % BS] = v[b, :, j]
    paged = send(dict(fields, NB=NB, BS=BS, BPS=BPS), dict(common, k=kp, v=vp, block_table=table), dtype)
    return dense, paged


def random_case(seed, B=2, H=4, H_kv=2, Tq=3, Tk=11, dk=5, dv=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, H, Tq, dk)), rng.standard_normal((B, H_kv, Tk, dk)),
            rng.standard_normal((B, H_kv, Tk, dv)))


def test_claims_paged_kv_with_every_page_size_attncheck_draws(flex):
    assert "paged_kv" in flex.capabilities
    assert sorted(flex.page_sizes) == sorted(PAGE_SIZES)


@pytest.mark.parametrize("BS", PAGE_SIZES)
def test_paged_equals_dense_with_key_lengths_kv_end_and_lse_pool_poisoned_finite(flex, BS):
    # B 2, H 4, H_kv 2 (grouped), Tq 3, Tk 11 (no page size but 1 divides it), dk 5, dv 3; lengths 11 and 4;
    # the pool's other slots 1e30 (what --masked-inputs finite poisons with): the paged call gives the dense one's
    q, k, v = random_case(BS)
    dense, paged = problems(q, k, v, BS, kv_lens=[11, 4], causal="lower-right", poison=1e30, want_lse=True, seed=BS)
    out_d, lse_d = flex(dense)
    out_p, lse_p = flex(paged)
    assert np.isfinite(out_p).all() and np.isfinite(lse_p).all()
    np.testing.assert_allclose(out_p, out_d, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lse_p, lse_d, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("BS", [2, 3, 16])
def test_allow_bias_and_softcap_read_at_logical_keys(flex, BS):
    # the allow mask and the bias are indexed at the logical key: their values move with the keys'
    q, k, v = random_case(10 + BS, B=2, H=2, H_kv=2, Tq=2, Tk=7, dk=4, dv=4)
    rng = np.random.default_rng(BS)
    allow = rng.random((2, 2, 7)) < 0.7
    allow[:, :, 0] = True
    bias = rng.standard_normal((2, 2, 2, 7))
    dense, paged = problems(q, k, v, BS, allow=allow, bias=bias, softcap=2.0, scale=0.7, poison=-1e30, seed=BS)
    np.testing.assert_allclose(flex(paged), flex(dense), rtol=1e-6, atol=1e-6)


def test_float64_paged_is_the_dense_answer_to_rounding(flex):
    q, k, v = random_case(3, B=3, H=2, H_kv=1, Tq=4, Tk=9, dk=3, dv=6)
    dense, paged = problems(q, k, v, 5, kv_lens=[9, 1, 6], causal="upper-left", window=(2, 0), poison=1e30, dtype="f64")
    np.testing.assert_allclose(flex(paged), flex(dense), rtol=1e-13, atol=1e-14)


def test_what_the_library_is_given(flex):
    # the pool is PagedAttention's cache [1, H_kv, NB * BS, d] as it is (page n's slot s at n * BS + s),
    # and reserve() gives each sequence the table's pages, in order, for its keys alone
    q, k, v = random_case(4, B=2, H=1, H_kv=1, Tq=1, Tk=5, dk=2, dv=2)
    _, p = problems(q, k, v, 2, kv_lens=[5, 2], seed=4)
    paged, kv_len, logical = flex.paged_call(p.B, p.Tk, p.BS, p.NB, p.block_table, p.kv_lens)
    assert kv_len.tolist() == [5, 2] and logical == 5
    assert paged.page_table[0, :3].tolist() == p.block_table[0, :3].tolist()
    assert paged.page_table[1, :1].tolist() == p.block_table[1, :1].tolist()
    assert (paged.page_table[0, 3:] == -1).all() and (paged.page_table[1, 1:] == -1).all()
    assert paged.physical_to_logical[0, p.block_table[0, :3].tolist()].tolist() == [0, 1, 2]
    assert paged.capacity.tolist() == [6, 2]


def test_keys_past_the_pool_are_past_every_sequence(flex):
    # Tk 10 with lengths 3: two pages of 2 hold every key; the logical block mask covers 4 keys (NB * BS)
    q, k, v = random_case(5, B=1, H=1, H_kv=1, Tq=2, Tk=10, dk=2, dv=2)
    dense, paged = problems(q, k, v, 2, kv_lens=[3], spare=0, poison=1e30)
    assert paged.NB == 2 and flex.paged_call(1, 10, 2, 2, paged.block_table, paged.kv_lens)[2] == 4
    np.testing.assert_allclose(flex(paged), flex(dense), rtol=1e-6, atol=1e-6)


def test_a_page_named_twice_among_a_sequences_keys_is_not_expressible(flex):
    q, k, v = random_case(6, B=1, H=1, H_kv=1, Tq=1, Tk=4, dk=2, dv=2)
    _, paged = problems(q, k, v, 2, poison=0.0)
    table = np.array(paged.block_table)
    table[0, 1] = table[0, 0]
    paged.block_table = table
    with pytest.raises(NotExpressible, match="twice"):
        flex(paged)


@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_a_nan_or_inf_in_an_unused_slot_reaches_every_row(flex, poison):
    # FlexAttention's convention (repro_forbidden_inputs_leak.py), over the whole pool: the eager path
    # multiplies the weights, 0 at every slot PagedAttention's mask_mod forbids, by all of V's cache
    q, k, v = random_case(7, B=1, H=1, H_kv=1, Tq=2, Tk=4, dk=2, dv=2)
    dense, paged = problems(q, k, v, 2, poison=poison, spare=1)
    assert np.isfinite(flex(dense)).all()
    assert np.isnan(flex(paged)).all()
    _, clean = problems(q, k, v, 2, poison=1e30, spare=1)
    np.testing.assert_allclose(flex(clean), flex(dense), rtol=1e-6, atol=1e-6)
