"""A correct NumPy attention (examples/python/student_numpy.py's) behind a library that cannot be
given some problems no restriction states: it raises attncheck.NotExpressible for them, which
attncheck counts as not taken, never as a finding. argv[1]: 'upper_left' (upper-left causal with
Tq != Tk: a few calls) or 'one_query' (every call with Tq > 1: most of them, so the run is inconclusive)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "python"))
import attncheck  # noqa: E402
import student_numpy  # noqa: E402

MODE = sys.argv[1]


def attention(p):
    if MODE == "upper_left" and p.causal == "upper-left" and p.Tq != p.Tk:
        raise attncheck.NotExpressible("upper-left causal with Tq != Tk: this library aligns at the bottom right")
    if MODE == "one_query" and p.Tq > 1:
        raise attncheck.NotExpressible(f"Tq {p.Tq}: this library decodes one query a call")
    return student_numpy.attention(p)


attncheck.serve(attention, capabilities={"f32", "allow", "causal", "kv_lens", "window"})
