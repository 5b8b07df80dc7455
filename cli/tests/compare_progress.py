"""compare_progress.py ATTNCHECK DIR: a long `attncheck compare` shows the oracle's progress on a
terminal (a pseudo-terminal made by util-linux's script), rewritten in place on stderr, up to every
row; with no terminal (a pipe, CI's logs) nothing of it is written. The problem is past
kAllRowsPairs (2^20 query-key pairs): [1,1,1100,16] queries, 1000 keys."""
import subprocess
import sys

import numpy as np

attncheck, folder = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(3)
q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in ((1, 1, 1100, 16), (1, 1, 1000, 16), (1, 1, 1000, 16)))
s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / 4
w = np.exp(s - s.max(axis=-1, keepdims=True))
out = ((w / w.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)).astype(np.float32)
args = [attncheck, "compare"]
for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
    np.save(f"{folder}/{name}.npy", x)
    args += [f"--{name}", f"{folder}/{name}.npy"]
line = "attncheck compare: the oracle's rows: "
problems = []
piped = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if piped.returncode != 0 or line in piped.stdout:
    problems.append(f"through a pipe: expected exit 0 and no progress, got exit {piped.returncode}:\n{piped.stdout}")
shown = subprocess.run(["script", "-qec", " ".join(args), "/dev/null"], stdout=subprocess.PIPE, text=True)
lines = shown.stdout.replace("\r\n", "\n").split("\r")
if shown.returncode != 0 or not any(f"{line}0 of 1100 computed exactly" in x for x in lines) or \
        not any(f"{line}1100 of 1100 computed exactly" in x for x in lines) or "PASS" not in shown.stdout:
    problems.append(f"on a terminal: expected exit 0, progress from 0 to 1100 rows and PASS, got exit "
                    f"{shown.returncode}:\n{shown.stdout}")
print("\n".join(problems) or "progress on a terminal only, as expected")
sys.exit(1 if problems else 0)
