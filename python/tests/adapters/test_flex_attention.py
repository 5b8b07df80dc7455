"""The flex_attention adapter's translation, on cases small enough to compute by hand, and the
conventions of the installed torch's FlexAttention on the CPU (torch 2.5 and later; skipped where
torch has no torch.nn.attention.flex_attention).

Run: PYTHONPATH=python $ATTNCHECK_TORCH_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_flex_attention.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention.flex_attention")
from hand_cases import problem, reload_refuses  # noqa: E402
from attncheck.adapters import flex_attention  # noqa: E402

# its one warning on the eager path, said in the adapter's docstring
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


@pytest.fixture(scope="module")
def flex():
    torch.set_num_threads(1)
    return flex_attention.Adapter()


def test_claims(flex):
    assert flex.capabilities == {"f32", "f64", "bf16", "f16", "allow", "kv_lens", "causal", "window", "softcap",
                                 "bias", "gqa", "lse", "paged_kv"}  # paged: torch's PagedAttention (test_paged.py)
    assert flex.page_sizes == (1, 2, 16, 3, 5, 7)
    assert flex.restrictions == []


def test_allow_mask_polarity_true_means_attend_and_is_broadcast_over_heads(flex):
    # B 1, H 2, Tq 2, Tk 2, equal scores: query 0 sees key 1 alone, query 1 both keys.
    q, k = np.zeros((1, 2, 2, 1)), np.zeros((1, 2, 2, 1))
    v = np.array([[1, 3], [10, 30]], np.float64).reshape(1, 2, 2, 1)
    allow = np.array([[False, True], [True, True]]).reshape(1, 2, 2)
    args = flex.translate(problem(q, k, v, allow=allow))
    assert args["allow"].tolist() == allow.tolist() and args["causal"] == "none"
    assert flex(problem(q, k, v, allow=allow))[0, :, :, 0].tolist() == [[3, 2], [30, 20]]


def test_the_mask_mods_reach_create_block_mask(flex):
    # the BlockMask's own mask_mod, evaluated on every (q_idx, kv_idx): kv_lens and lower-right causal combined
    mask = flex.block_mask(2, 2, 3, kv_lens=[3, 1], causal="lower-right")
    dense = [[[bool(mask.mask_mod(torch.tensor(b), torch.tensor(0), torch.tensor(i), torch.tensor(j)))
               for j in range(3)] for i in range(2)] for b in range(2)]
    assert dense == [[[True, True, False], [True, True, True]], [[True, False, False], [True, False, False]]]
    assert flex.block_mask(1, 2, 3) is None  # no mask: no block_mask


def test_key_lengths_per_batch(flex):
    q, k = np.zeros((2, 1, 1, 1)), np.zeros((2, 1, 3, 1))
    v = np.tile(np.array([3, 6, 9], np.float64).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    assert flex(problem(q, k, v, kv_lens=[3, 1])).ravel().tolist() == [6, 3]


@pytest.mark.parametrize("causal, expected", [("upper-left", [0, 0.5]), ("lower-right", [0.5, 1])])
def test_causal_alignments_with_tq_lt_tk(flex, causal, expected):
    # Tq 2, Tk 3: upper-left query i sees j <= i, lower-right j <= i + 1
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 3, 1))
    v = np.array([0, 1, 2], np.float64).reshape(1, 1, 3, 1)
    assert flex(problem(q, k, v, causal=causal)).ravel().tolist() == expected


def test_window_is_anchored_at_the_lower_right_diagonal(flex):
    # Tq 2, Tk 4, window (1, 0): query i sees keys i + 2 - 1 .. i + 2
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 4, 1))
    v = np.array([0, 10, 20, 30], np.float64).reshape(1, 1, 4, 1)
    assert flex(problem(q, k, v, window=(1, 0))).ravel().tolist() == [15, 25]
    assert flex(problem(q, k, v, window=(-1, 0))).ravel().tolist() == [10, 15]  # left unbounded


def test_softcap_applies_to_the_scaled_score_then_bias(flex):
    q = np.array([2.0]).reshape(1, 1, 1, 1)
    k = np.array([0.0, 3.0]).reshape(1, 1, 2, 1)
    v = np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    bias = np.array([0.0, 0.5]).reshape(1, 1, 1, 2)
    p = problem(q, k, v, dtype="f64", scale=0.5, softcap=2.0, bias=bias)
    s = 2 * math.tanh(0.5 * 6 / 2) + 0.5  # key 1: softcap * tanh(scale q.k / softcap) + bias; key 0: 0
    assert flex(p).item() == pytest.approx(math.exp(s) / (1 + math.exp(s)), rel=1e-14)
    # several soft-cap values in turn: each runs (a captured float would raise from the second on)
    for c in (1.0, 3.0, 7.0):
        assert np.isfinite(flex(problem(q, k, v, softcap=c))).all()


def test_scale_is_passed_as_the_keyword(flex):
    q = np.array([1.0]).reshape(1, 1, 1, 1)
    k = np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    v = np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    p = problem(q, k, v, scale=-2.0)
    assert flex.translate(p)["scale"] == -2.0
    assert flex(p).item() == pytest.approx(math.exp(-2) / (1 + math.exp(-2)), rel=1e-6)


def test_grouped_kv_heads_are_contiguous_groups(flex):
    # H 4, H_kv 2: query head h gets KV head h // 2
    q, k = np.zeros((1, 4, 1, 1)), np.zeros((1, 2, 1, 1))
    v = np.array([10, 20], np.float64).reshape(1, 2, 1, 1)
    assert flex(problem(q, k, v)).ravel().tolist() == [10, 10, 20, 20]


def test_value_width_unlike_key_width(flex):
    q, k = np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 2, 2))
    v = np.array([[1, 2, 3], [3, 4, 5]], np.float64).reshape(1, 1, 2, 3)
    assert flex(problem(q, k, v)).ravel().tolist() == [2, 3, 4]


def test_lse_is_the_natural_log_sum_exp_and_an_empty_row_is_zero_and_minus_inf(flex):
    q = np.array([1.0, 1.0]).reshape(1, 1, 2, 1)
    k = np.array([0.5, 2.0, 7.0]).reshape(1, 1, 3, 1)
    v = np.array([1.0, 3.0, 100.0]).reshape(1, 1, 3, 1)
    allow = np.array([[True, True, False], [False, False, False]]).reshape(1, 2, 3)
    out, lse = flex(problem(q, k, v, dtype="f64", scale=1.0, allow=allow, want_lse=True))
    e1, e2 = math.exp(0.5), math.exp(2.0)
    assert out[0, 0, 0, 0] == pytest.approx((e1 + 3 * e2) / (e1 + e2), rel=1e-14)
    assert lse[0, 0, 0] == pytest.approx(math.log(e1 + e2), rel=1e-14)
    assert out[0, 0, 1, 0] == 0 and lse[0, 0, 1] == -math.inf  # attncheck's defaults


def test_formats_round_trip(flex):
    q = np.array([0.5, -1]).reshape(1, 1, 1, 2)
    k = np.array([1, 1, -1, 0.5]).reshape(1, 1, 2, 2)
    v = np.array([2, -2]).reshape(1, 1, 2, 1)
    s = np.array([-0.5, -1.0]) / math.sqrt(2)
    exact = (np.exp(s) / np.exp(s).sum()) @ [2, -2]
    out64 = flex(problem(q, k, v, dtype="f64"))
    assert out64.dtype == np.float64 and out64.item() == pytest.approx(exact, rel=1e-14)
    out = flex(problem(q, k, v, dtype="bf16"))
    assert out.dtype == np.float32 and out.item() == pytest.approx(exact, abs=2 ** -6)
    assert float(torch.tensor(out.item()).to(torch.bfloat16)) == out.item()  # a bf16 value, held in float32
    assert flex(problem(q, k, v, dtype="f16")).dtype == np.float16


def test_a_nan_in_a_forbidden_value_reaches_the_output(flex):
    # the convention --masked-inputs finite accepts (repro_forbidden_inputs_leak.py)
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([1.0, np.nan]).reshape(1, 1, 2, 1)
    assert np.isnan(flex(problem(q, k, v, kv_lens=[1]))).all()


def test_a_torch_without_flex_attention_is_refused(capsys, monkeypatch):
    said = reload_refuses(flex_attention, torch, "2.4.1", capsys, monkeypatch)
    assert said.startswith("attncheck.adapters.flex_attention: torch 2.4.1 is older than 2.5")
