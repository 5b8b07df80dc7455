"""compare_layouts.py ATTNCHECK DIR: `attncheck compare` on what PyTorch and JAX users dump (issue 25):
[B,T,H,d] tensors with --layout bshd (and the hint without it), masks broadcast from [B,1,1,Tk],
and a mask that differs between heads (checked as a bias of -inf), each passing on the right output
and failing on one that ignores the mask. The outputs are NumPy's in float64, rounded to float32."""
import subprocess
import sys

import numpy as np

attncheck, folder = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
B, H, Tq, Tk, d = 2, 3, 4, 5, 8


def attention(q, k, v, mask):
    """q [B,H,Tq,d], k, v [B,H,Tk,d], mask broadcastable to [B,H,Tq,Tk] (True = may attend)."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def save(name, x):
    path = f"{folder}/{name}.npy"
    np.save(path, x)
    return path


def compare(expect, said, *args):
    run = subprocess.run([attncheck, "compare", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = run.returncode == expect and said in run.stdout
    print(("ok  " if ok else "FAIL") + f" exit {run.returncode} (expected {expect}), '{said}': " + run.stdout.strip().splitlines()[-1][:160])
    return ok


q, k, v = (rng.standard_normal((B, H, T, d)) for T in (Tq, Tk, Tk))
everything = np.ones((B, H, Tq, Tk), bool)
padding = np.ones((B, 1, 1, Tk), bool)
padding[1, 0, 0, 3:] = False
per_head = rng.random((B, H, Tq, Tk)) < 0.7
per_head[..., 0] = True  # no empty rows
bshd = lambda x: np.ascontiguousarray(np.swapaxes(x, 1, 2)).astype(np.float32)
bhsd = lambda x: x.astype(np.float32)
results = []
files = {n: save(n, bshd(x)) for n, x in (("q", q), ("k", k), ("v", v), ("out", attention(q, k, v, everything)))}
args = ["--q", files["q"], "--k", files["k"], "--v", files["v"], "--out", files["out"]]
results.append(compare(0, "attncheck compare: PASS", *args, "--layout", "bshd"))
results.append(compare(2, "they fit as [B,T,H,d]: --layout bshd", *args))
for name, mask in (("padding", padding), ("per_head", per_head)):
    files = {n: save(n, bhsd(x)) for n, x in (("q", q), ("k", k), ("v", v))}
    right, ignored = save(name + "_out", bhsd(attention(q, k, v, mask))), save(name + "_ignored", bhsd(attention(q, k, v, everything)))
    args = ["--q", files["q"], "--k", files["k"], "--v", files["v"], "--allow", save(name + "_mask", mask)]
    results.append(compare(0, "attncheck compare: PASS", *args, "--out", right))
    results.append(compare(1, "attncheck compare: FAIL", *args, "--out", ignored))
results.append(compare(2, "expected shape [Tq,Tk], [B,Tq,Tk] or [B,H,Tq,Tk]", "--q", files["q"], "--k", files["k"], "--v",
                       files["v"], "--out", right, "--allow", save("bad_mask", np.ones((B, 2, Tq, Tk), bool))))
sys.exit(0 if all(results) else 1)
