"""A child that does no attention work: it answers every problem with zeros of the right shape, so
that timing it against the checker measures the bridge alone (the protocol, the Python client's
decoding and encoding, the interpreter). Used by bench/bridge_bench.cpp.

Run: attncheck check --impl-cmd "/usr/bin/python3 bench/null_child.py" reports wrong outputs, as it should.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))  # the client, from the source tree
import attncheck


def zeros(p):
    # p.q [B,H,Tq,dk], p.k [B,H_kv,Tk,dk], p.v [B,H_kv,Tk,dv]; out [B,H,Tq,dv] and lse [B,H,Tq], all 0
    dtype = np.float64 if p.dtype == "f64" else np.float32
    out = np.zeros((p.B, p.H, p.Tq, p.dv), dtype)
    return (out, np.zeros((p.B, p.H, p.Tq), dtype)) if p.want_lse else out


if __name__ == "__main__":
    attncheck.serve(zeros, capabilities={"f32", "f64", "f16", "bf16", "allow", "causal", "kv_lens", "gqa", "window",
                                         "softcap", "bias", "lse"})
