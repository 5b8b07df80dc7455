"""attncheck inside pytest: `attncheck.check(fn)` runs the whole campaign on fn and raises
AssertionError with the report (and the counterexample as NumPy arrays) on a finding.

Run: ATTNCHECK_BIN=build/cli/attncheck /usr/bin/python3 -m pytest examples/python/test_attention.py
"""
import attncheck
import pytest

import cs336_adapter
import student_numpy
import textbook_numpy
import torch_attention

STUDENT = {"f32", "f64", "allow", "causal", "kv_lens", "window"}
# A pass runs every property that applies once at least: a count of runs, with room in seconds, is
# the same on any machine (a budget in seconds alone is inconclusive on a slow or busy one).
CASES, SECONDS = 45, 300


def test_numpy_student_passes():
    report = attncheck.check(student_numpy.attention, cases=CASES, seconds=SECONDS, capabilities=STUDENT)
    assert report["verdict"] == "PASS" and report["cases"] > 0


def test_torch_attention_passes_in_float32_and_float64_with_its_backward():
    report = attncheck.check(torch_attention.forward, backward=torch_attention.backward, cases=CASES, seconds=SECONDS,
                             capabilities={"f32", "f64", "allow", "causal", "lse"})
    assert report["checked"] == ["f32", "f64", "allow mask", "causal", "lse", "backward"]


def test_cs336_adapter_passes():
    attncheck.check(attncheck.masked(cs336_adapter.run_scaled_dot_product_attention, tensors="torch"), cases=CASES, seconds=SECONDS,
                    empty_rows="nan")


def test_flipped_mask_is_caught_with_a_counterexample_to_paste(tmp_path):
    with pytest.raises(AssertionError) as finding:
        attncheck.check(attncheck.masked(cs336_adapter.inverted_polarity, tensors="torch"), cases=CASES, seconds=SECONDS,
                        empty_rows="nan", counterexample=str(tmp_path / "flipped.replay"))
    report = str(finding.value)
    assert "attncheck check: FAIL" in report
    assert "mask = np.array([" in report  # the shrunk case as NumPy arrays


def test_a_nested_function_is_refused_with_the_reason():
    def nested(p):
        return p.q
    with pytest.raises(TypeError, match="define it at the top level of a module"):
        attncheck.check(nested)


def test_an_unknown_capability_is_refused():
    with pytest.raises(ValueError, match="unknown capability 'flash'"):
        attncheck.check(student_numpy.attention, capabilities={"f32", "flash"}, seconds=1)


def test_textbook_weights_at_v_passes_when_masked_inputs_are_finite():
    report = attncheck.check(textbook_numpy.attention, cases=CASES, seconds=SECONDS, capabilities=STUDENT, masked_inputs="finite")
    assert report["verdict"] == "PASS" and report["policies"]["masked-inputs"] == "finite"


def test_textbook_weights_at_v_is_flagged_under_the_strict_contract(tmp_path):
    with pytest.raises(AssertionError) as finding:
        attncheck.check(textbook_numpy.attention, cases=CASES, seconds=SECONDS, capabilities=STUDENT,
                        counterexample=str(tmp_path / "textbook.replay"))
    assert "attncheck check: FAIL" in str(finding.value)


def test_keep_going_raises_with_every_finding(tmp_path):
    with pytest.raises(AssertionError) as finding:
        attncheck.check(attncheck.masked(cs336_adapter.inverted_polarity, tensors="torch"), cases=CASES, seconds=SECONDS,
                        empty_rows="nan", keep_going=True, counterexample=str(tmp_path / "findings"),
                        args=("--shrink-seconds", "1"))
    report = str(finding.value)
    assert "findings: " in report and "finding 1 of " in report
    assert list((tmp_path / "findings").glob("*.replay"))  # a replay file for each
