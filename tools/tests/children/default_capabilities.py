"""The NumPy student's attention served with the default capabilities, {"f32"}: a Python user's
first try. It raises on anything it does not claim (a mask, key lengths, grouped KV heads, a
window, a soft-cap, a bias, an lse, another format), so that a campaign sending it one fails
(issue 22: a kernel is never sent what it does not claim).
"""
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(root / "python"))
sys.path.insert(0, str(root / "examples" / "python"))
import attncheck
from student_numpy import attention


def f32_only(p):
    used = {"dtype": p.dtype != "f32", "allow": p.allow is not None, "causal": p.causal != "none",
            "kv_lens": p.kv_lens is not None, "gqa": p.k.shape[1] != p.q.shape[1],
            "window": p.window is not None, "softcap": p.softcap is not None, "bias": p.bias is not None,
            "lse": p.want_lse, "backward": p.backward}
    unclaimed = [name for name, is_used in used.items() if is_used]
    if unclaimed:
        raise ValueError(f"sent what it does not claim: {', '.join(unclaimed)}")
    return attention(p)


if __name__ == "__main__":
    attncheck.serve(f32_only)
