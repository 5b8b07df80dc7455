"""A failing attncheck.check under pytest (not collected by itself: ctest python.PytestShowsTheReport
runs it and expects it to fail): pytest must show attncheck's report, not check()'s source."""
import sys
from pathlib import Path

import attncheck

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "python"))
import cs336_adapter  # noqa: E402


def test_a_finding_shows_the_report(tmp_path):
    attncheck.check(attncheck.masked(cs336_adapter.inverted_polarity, tensors="torch"), cases=50, seconds=600, empty_rows="nan",
                    counterexample=str(tmp_path / "flipped.replay"))
