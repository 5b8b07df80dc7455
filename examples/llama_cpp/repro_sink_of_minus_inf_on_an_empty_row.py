"""llama.cpp's sinks (ggml_flash_attn_ext_add_sinks, ggml_soft_max_add_sinks: one float32 logit per
query head, as gpt-oss's attn_sinks) on a row with no permitted key, on the CPU:

  a finite sink   the row's max is the sink, no key adds anything: output 0 on both paths, as the
                  contract says (0 whatever the empty-row policy).
  a sink of -inf  the contract's "no sink": the row should be as without one, which with flash
                  attention is 0. ggml gives NaN on both paths: the row's max M stays -inf and the
                  sink's term is exp(sink - M) = exp(-inf - -inf) = NaN (the softmax path's row is
                  NaN without a sink too, --empty-rows nan). llama.cpp's own models pass learned,
                  finite sinks, so it meets this only if a sink of -inf is given on purpose.

attncheck's finding (--path flash --dtype f32 --masked-inputs finite, 60 s): Property.SinksAgreeWithOracle,
B 1 H 1 Tq 1 Tk 1, the key forbidden, sinks -inf: expected 0, got NaN ("accepted under --empty-rows nan").

Shown with llama-cpp-python 0.3.36 (llama.cpp 0c1e570, built from the sdist on the CPU),
numpy 2.3.5 (ci/requirements-llama.txt), through ggml alone (ggml_attention.py beside this file).
Run: $ATTNCHECK_LLAMA_PYTHON examples/llama_cpp/repro_sink_of_minus_inf_on_an_empty_row.py
Exit 0 while each behaviour above holds, 1 otherwise.
"""
import sys

import numpy as np

from ggml_attention import flash, softmax


def empty_row(path, sink, Tq=1, mask_value=-np.inf):
    """out[0, 0, 0, 0] of a query whose two keys (value 1) are forbidden (mask_value), with one sink."""
    q = np.zeros((1, 1, Tq, 1), np.float32)
    k, v = np.zeros((1, 1, 2, 1), np.float16), np.ones((1, 1, 2, 1), np.float16)
    mask = np.full((1, 1, Tq, 2), mask_value)
    if path is flash:
        return flash(q, k, v, mask.astype(np.float16), 1.0, sinks=[sink])[0, 0, 0, 0]
    return softmax(q, k, v, mask.astype(np.float32), 1.0, sinks=[sink])[0, 0, 0, 0]


inf = np.inf
seen = {
    "flash, finite sink 0": empty_row(flash, 0.0),
    "flash, sink -inf": empty_row(flash, -inf),
    "flash, 64 rows (tiled path), sink -inf": empty_row(flash, -inf, Tq=64),
    "softmax, finite sink 0": empty_row(softmax, 0.0),
    "softmax, sink -inf": empty_row(softmax, -inf),
}
expected = [0, np.nan, np.nan, 0, np.nan]
for (what, out), want in zip(seen.items(), expected):
    print(f"{what}: {out} ({'NaN' if np.isnan(want) else want} expected of llama.cpp; the contract: 0)")
if all(np.isnan(out) if np.isnan(want) else out == want for out, want in zip(seen.values(), expected)):
    print("reproduced: a sink of -inf makes a row with no permitted key NaN (exp(-inf - -inf))")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
