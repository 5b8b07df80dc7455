"""The torch_sdpa adapter's translation, on cases small enough to compute by hand, and the
conventions of the installed torch's SDPA on the CPU (torch 1.13, Debian's python3-torch, and 2.x).

Run: PYTHONPATH=python /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests/adapters/test_torch_sdpa.py
(and the same with a venv's python that has a current torch: tests of 2.x features skip on 1.13,
tests of 1.13 alone skip on 2.x).
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
torch = pytest.importorskip("torch")
from hand_cases import problem, reload_refuses  # noqa: E402
from attncheck.adapters import torch_sdpa  # noqa: E402

F = torch.nn.functional

LEGACY = torch_sdpa.LEGACY
needs_2x = pytest.mark.skipif(LEGACY, reason="torch 1.13 has no such feature")
only_113 = pytest.mark.skipif(not LEGACY, reason="a torch 1.13 convention")
needs_flash_op = pytest.mark.skipif(torch_sdpa.FLASH_FOR_CPU is None, reason="no CPU flash operator in this torch")


@pytest.fixture(scope="module")
def sdpa():
    torch.set_num_threads(1)
    return torch_sdpa.Adapter()


def test_allow_mask_polarity_true_means_attend_and_is_broadcast_over_heads(sdpa):
    # B 1, H 2, Tq 2, Tk 2, equal scores: query 0 sees key 1 alone, query 1 both keys.
    q, k = np.zeros((1, 2, 2, 1)), np.zeros((1, 2, 2, 1))
    v = np.array([[1, 3], [10, 30]], np.float64).reshape(1, 2, 2, 1)
    allow = np.array([[False, True], [True, True]]).reshape(1, 2, 2)
    args = sdpa.translate(problem(q, k, v, allow=allow))
    assert args["allowed"].tolist() == allow.tolist() and not args["is_causal"]
    assert sdpa(problem(q, k, v, allow=allow))[0, :, :, 0].tolist() == [[3, 2], [30, 20]]


def test_explicit_mask_on_a_1x1x2x2_case(sdpa):
    q = np.array([[1, 0], [0, 1]]).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]]).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]]).reshape(1, 1, 2, 2)
    out = sdpa(problem(q, k, v, allow=np.array([[True, False], [True, True]]).reshape(1, 2, 2)))
    # query 1: scores (0, 2) / sqrt(2), weights (1, w) / (1 + w)
    w = math.exp(2 / math.sqrt(2))
    expected = np.array([[1, 2], [(1 + 3 * w) / (1 + w), (2 + 4 * w) / (1 + w)]]).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_key_lengths_become_the_bool_mask_per_batch(sdpa):
    q, k = np.zeros((2, 1, 1, 1)), np.zeros((2, 1, 3, 1))
    v = np.tile(np.array([3, 6, 9], np.float64).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, kv_lens=[3, 1])
    assert sdpa.translate(p)["allowed"][:, 0].tolist() == [[True, True, True], [True, False, False]]
    assert sdpa(p).ravel().tolist() == [6, 3]


def test_upper_left_causal_is_is_causal_and_upper_left_when_tq_lt_tk(sdpa):
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 3, 1))
    v = np.array([0, 1, 2], np.float64).reshape(1, 1, 3, 1)
    p = problem(q, k, v, causal="upper-left")
    args = sdpa.translate(p)
    assert args["is_causal"] and args["allowed"] is None
    assert sdpa(p).ravel().tolist() == [0, 0.5]  # query 0: key 0; query 1: keys 0, 1


def test_lower_right_causal_with_tq_ne_tk(sdpa):
    # Tq 2, Tk 3, lower-right: query i sees keys j <= i + 1.
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 3, 1))
    v = np.array([0, 1, 2], np.float64).reshape(1, 1, 3, 1)
    p = problem(q, k, v, causal="lower-right")
    args = sdpa.translate(p)
    assert not args["is_causal"]
    if torch_sdpa.LOWER_RIGHT is not None:
        assert args["lower_right"] and args["allowed"] is None   # torch's own causal_lower_right
    else:
        assert args["allowed"][0].tolist() == [[True, True, False], [True, True, True]]  # Translated
    assert sdpa(p).ravel().tolist() == [0.5, 1]


def test_lower_right_when_square_is_is_causal(sdpa):
    q, k, v = (np.zeros((1, 1, 2, 1)) for _ in range(3))
    args = sdpa.translate(problem(q, k, v, causal="lower-right"))
    assert args["is_causal"] and args["allowed"] is None and not args["lower_right"]


def test_causal_with_a_mask_goes_into_the_mask(sdpa):
    # torch refuses is_causal with an attn_mask: upper-left AND key lengths in one bool mask.
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([4, 8], np.float64).reshape(1, 1, 2, 1)
    p = problem(q, k, v, causal="upper-left", kv_lens=[1])
    args = sdpa.translate(p)
    assert not args["is_causal"] and args["allowed"][0].tolist() == [[True, False], [True, False]]
    assert sdpa(p).ravel().tolist() == [4, 4]


def test_bias_with_an_allow_mask_is_one_float_mask(sdpa):
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 3, 1))
    v = np.array([1, 2, 4], np.float64).reshape(1, 1, 3, 1)
    bias = np.array([0, math.log(3), 5]).reshape(1, 1, 1, 3)
    p = problem(q, k, v, allow=np.array([True, True, False]).reshape(1, 1, 3), bias=bias)
    # weights (1, 3) / 4 over the permitted keys; key 2's bias 5 must not count
    assert sdpa(p).item() == pytest.approx(7 / 4, rel=1e-6)
    # a bias alone is added to the scores
    assert sdpa(problem(q, k, v, bias=bias)).item() == pytest.approx((1 + 6 + 4 * math.exp(5)) / (4 + math.exp(5)),
                                                                      rel=1e-6)


def test_formats_round_trip_and_float64_is_computed_in_float64(sdpa):
    q = np.array([0.5, -1]).reshape(1, 1, 1, 2)
    k = np.array([1, 1, -1, 0.5]).reshape(1, 1, 2, 2)
    v = np.array([2, -2]).reshape(1, 1, 2, 1)
    s = np.array([-0.5, -1.0]) / math.sqrt(2)
    exact = (np.exp(s) / np.exp(s).sum()) @ [2, -2]
    out64 = sdpa(problem(q, k, v, dtype="f64"))
    assert out64.dtype == np.float64 and out64.item() == pytest.approx(exact, rel=1e-14)
    out = sdpa(problem(q, k, v, dtype="bf16"))
    assert out.dtype == np.float32 and out.item() == pytest.approx(exact, abs=2 ** -7)
    assert float(torch.tensor(out.item()).to(torch.bfloat16)) == out.item()  # a bf16 value, held in float32


def test_claims(sdpa):
    claims = sdpa.capabilities
    assert {"f32", "f64", "bf16", "allow", "kv_lens", "causal", "bias"} <= claims
    assert not claims & {"window", "softcap", "backward", "lse"}
    assert ("f16" in claims) == (not LEGACY)
    assert (claims >= {"dropout", "dropout_mask"}) == LEGACY
    assert ("gqa" in claims) == torch_sdpa.HAS_GQA


# torch 1.13 (Debian 12): what its _scaled_dot_product_attention does.

@only_113
def test_113_a_row_with_no_permitted_key_gives_nan(sdpa):
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([1, 3], np.float64).reshape(1, 1, 2, 1)
    assert np.isnan(sdpa(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item())


@only_113
def test_113_an_explicit_scale_is_refused_not_folded(sdpa):
    q, k, v = (np.zeros((1, 1, 1, 1)) for _ in range(3))
    with pytest.raises(ValueError, match="no scale argument"):
        sdpa(problem(q, k, v, scale=0.25))


@only_113
def test_113_an_explicit_scale_of_1_over_sqrt_dk_is_its_default(sdpa):
    q = np.full((1, 1, 1, 4), 0.5)
    k = np.array([[1, 1, 1, 1], [0, 0, 0, 0]], np.float64).reshape(1, 1, 2, 4)
    v = np.array([1, 0], np.float64).reshape(1, 1, 2, 1)
    # scores 2 x 1/2 = 1 and 0: out = e / (e + 1)
    assert sdpa(problem(q, k, v, scale=0.5)).item() == pytest.approx(np.e / (np.e + 1), rel=1e-6)


@only_113
def test_113_has_no_float16_and_no_flash_backend():
    with pytest.raises(RuntimeError, match="Half"):
        torch_sdpa.Adapter().call("f16", 1, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="one CPU path"):
        torch_sdpa.Adapter("flash")
    with pytest.raises(ValueError, match="--lse needs"):
        torch_sdpa.Adapter(lse=True)


def dropout_case(seed, want_keep=True, allow=None):
    # B 1, H 2, Tq 3, Tk 4, float64: every weight before dropout well away from 0
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((1, 2, 3, 2)), rng.standard_normal((1, 2, 4, 2)), rng.standard_normal((1, 2, 4, 3))
    return problem(q, k, v, dtype="f64", allow=allow, dropout=(0.4, seed), want_keep=want_keep), (q, k, v)


@only_113
def test_113_dropout_after_the_softmax_and_its_keep_mask_as_torch_applied_it(sdpa):
    p, (q, k, v) = dropout_case(seed=2 ** 64 - 1)
    out, keep = sdpa(p)
    assert keep.shape == (1, 2, 3, 4) and keep.dtype == bool and 0 < keep.sum() < keep.size
    s = q @ k.swapaxes(-1, -2) / math.sqrt(2)
    weights = np.exp(s - s.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    # each kept weight divided by 1 - p (torch multiplies by 1/(1-p) rounded: within a few ulps), others 0
    np.testing.assert_allclose(out, np.where(keep, weights / (1 - 0.4), 0) @ v, rtol=1e-13)


@only_113
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_113_a_kept_weight_is_times_1_over_1_minus_p_rounded_to_the_format(dtype):
    # the weights torch returns, which the keep mask is read off: 0, or the weight before dropout
    # times the factor 1/(1-p) rounded to the format first (in bf16 1.4296875 for 1/0.7 = 1.428571...)
    q, k, v = (torch.from_numpy(x).to(dtype) for x in dropout_case(seed=5)[1])
    torch.manual_seed(5)
    _, weights = F._scaled_dot_product_attention(q, k, v, None, 0.3, True, False)
    _, before = F._scaled_dot_product_attention(q, k, v, None, 0.0, True, False)
    kept = weights != 0
    assert 0 < kept.sum() < kept.numel()
    assert torch.equal(weights[kept], before[kept] * torch.tensor(1 / 0.7, dtype=dtype))


@only_113
def test_113_one_seed_gives_one_mask_whatever_ran_before(sdpa):
    out, keep = sdpa(dropout_case(seed=5)[0])
    torch.rand(100)  # the default generator moved on: the adapter seeds it again
    again, keep_again = sdpa(dropout_case(seed=5)[0])
    assert np.array_equal(keep, keep_again) and np.array_equal(out, again)
    other = [sdpa(dropout_case(seed=s)[0])[1] for s in (6, 7, 8)]
    assert not all(np.array_equal(keep, o) for o in other)
    # without the keep mask asked, the same dropout: the same out, alone
    assert np.array_equal(sdpa(dropout_case(seed=5, want_keep=False)[0]), out)


@only_113
def test_113_a_forbidden_keys_bit_reads_as_dropped(sdpa):
    # its weight is 0 before dropout, so torch's bit cannot be seen, and cannot change out
    allow = np.array([[True, True, False, True]] * 3).reshape(1, 3, 4)
    _, keep = sdpa(dropout_case(seed=5, allow=allow)[0])
    assert not keep[..., 2].any()
    _, unmasked = sdpa(dropout_case(seed=5)[0])
    assert np.array_equal(keep[..., [0, 1, 3]], unmasked[..., [0, 1, 3]])  # the same stream, mask or not


# torch 2.x

@needs_2x
def test_scale_is_passed_as_the_keyword(sdpa):
    q = np.array([1.0]).reshape(1, 1, 1, 1)
    k = np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    v = np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    p = problem(q, k, v, scale=-2.0)
    assert sdpa.translate(p)["scale"] == -2.0
    # scores (0, -2): weight of key 1 is e^-2 / (1 + e^-2)
    assert sdpa(p).item() == pytest.approx(math.exp(-2) / (1 + math.exp(-2)), rel=1e-6)


@pytest.mark.skipif(not torch_sdpa.HAS_GQA, reason="enable_gqa is 2.5 and later")
@pytest.mark.parametrize("backend", ["default", "math", "flash"])
def test_grouped_kv_heads_are_contiguous_groups(backend):
    # H 4, H_kv 2, one key each: query head h gets KV head h // 2: 10 10 20 20 (h % 2: 10 20 10 20).
    q, k = np.zeros((1, 4, 1, 1)), np.zeros((1, 2, 1, 1))
    v = np.array([10, 20], np.float64).reshape(1, 2, 1, 1)
    assert torch_sdpa.Adapter(backend)(problem(q, k, v)).ravel().tolist() == [10, 10, 20, 20]


@needs_2x
@pytest.mark.parametrize("backend", ["math", "flash"])
def test_2x_a_row_with_no_permitted_key_gives_zero(backend):
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([1, 3], np.float64).reshape(1, 1, 2, 1)
    assert torch_sdpa.Adapter(backend)(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item() == 0


@needs_flash_op
def test_lse_is_the_natural_log_sum_exp_and_an_empty_row_gets_zero():
    lse = torch_sdpa.Adapter(lse=True)
    assert "lse" in lse.capabilities
    q = np.array([1.0]).reshape(1, 1, 1, 1)
    k = np.array([0.5, 2.0, 7.0]).reshape(1, 1, 3, 1)
    v = np.array([1.0, 3.0, 100.0]).reshape(1, 1, 3, 1)
    allow = np.array([[True, True, False], [False, False, False]]).reshape(1, 2, 3)
    p = problem(np.concatenate([q, q], axis=2), k, v, allow=allow, want_lse=True)
    out, l = lse(p)
    e1, e2 = math.exp(0.5), math.exp(2.0)
    assert out[0, 0, 0, 0] == pytest.approx((e1 + 3 * e2) / (e1 + e2), rel=1e-6)
    assert l[0, 0, 0] == pytest.approx(math.log(e1 + e2), rel=1e-6)
    assert out[0, 0, 1, 0] == 0 and l[0, 0, 1] == 0  # the CPU flash kernel's empty row: out 0, lse 0 (not -inf)


def test_a_torch_older_than_1_13_is_refused(capsys, monkeypatch):
    said = reload_refuses(torch_sdpa, torch, "1.12.1", capsys, monkeypatch)
    assert said.startswith("attncheck.adapters.torch_sdpa: torch 1.12.1 is older than 1.13")
