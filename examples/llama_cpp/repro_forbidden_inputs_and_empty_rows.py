"""llama.cpp's conventions for forbidden keys and for rows with none, on the CPU (its KQ mask holds
-INFINITY where a key is forbidden):

  without flash attention  ggml_soft_max_ext adds the mask to every score and takes the whole row:
                           a row whose keys are all forbidden is NaN (max -inf, exp(-inf - -inf));
                           a NaN in a forbidden key makes its score NaN, and NaN + -inf is NaN, so
                           the row is NaN; the weights (0 for a forbidden key) multiply all of V,
                           so a NaN in a forbidden value reaches the output through 0 x NaN.
  flash attention          a row with no permitted key gives 0 (S = 0, ggml's S_inv = 0). With
                           fewer than 64 query rows (the one-chunk path) a forbidden key is skipped
                           outright, NaN in it or in its value changes nothing; from 64 rows on
                           (the tiled path) the scores and P V are computed for every key, and a
                           NaN in a forbidden value, or in a forbidden key, reaches the row.

So attncheck checks the path without flash attention under --empty-rows nan --masked-inputs
finite, and flash attention under --masked-inputs finite. attncheck's findings (strict contract,
seed 1, 60 s): --path softmax, EmptyRowsFollowThePolicy (NaN, --empty-rows nan accepts it) and
ForbiddenKeysAndValuesCannotChangeValidOutputs (k -inf where forbidden, --masked-inputs finite);
--path flash, the same property with Tq 64 (a forbidden key inf: NaN).

Shown with llama-cpp-python 0.3.36 (llama.cpp 0c1e570, built from the sdist on the CPU),
numpy 2.3.5 (ci/requirements-llama.txt), through ggml alone (ggml_attention.py beside this file).
Run: $ATTNCHECK_LLAMA_PYTHON examples/llama_cpp/repro_forbidden_inputs_and_empty_rows.py
Exit 0 while each convention above holds, 1 otherwise.
"""
import sys

import numpy as np

from ggml_attention import flash, softmax


def first_row(path, k, v, mask_row, Tq=1):
    """out[0, 0, 0, 0] of one query 1 (repeated Tq times) against keys k, values v and a mask row."""
    q = np.ones((1, 1, Tq, 1), np.float32)
    k, v = (np.array(x, np.float16).reshape(1, 1, -1, 1) for x in (k, v))
    mask = np.tile(np.array(mask_row).reshape(1, 1, 1, -1), (1, 1, Tq, 1))
    if path is flash:
        return flash(q, k, v, mask.astype(np.float16), 1.0)[0, 0, 0, 0]
    return softmax(q, k, v, mask.astype(np.float32), 1.0)[0, 0, 0, 0]


inf = np.inf
seen = {
    "softmax, empty row": first_row(softmax, [0, 0], [1, 2], [-inf, -inf]),
    "softmax, NaN in a forbidden key": first_row(softmax, [0, np.nan], [1, 2], [0, -inf]),
    "softmax, NaN in a forbidden value": first_row(softmax, [0, 0], [1, np.nan], [0, -inf]),
    "flash, empty row": first_row(flash, [0, 0], [1, 2], [-inf, -inf]),
    "flash, NaN in a forbidden key": first_row(flash, [0, np.nan], [1, 2], [0, -inf]),
    "flash, NaN in a forbidden value": first_row(flash, [0, 0], [1, np.nan], [0, -inf]),
    "flash, 64 rows, NaN in a forbidden value": first_row(flash, [0, 0], [1, np.nan], [0, -inf], Tq=64),
}
expected = [np.nan, np.nan, np.nan, 0, 1, 1, np.nan]
for (what, out), want in zip(seen.items(), expected):
    print(f"{what}: {out} ({'NaN' if np.isnan(want) else want} expected of llama.cpp)")
if all(np.isnan(out) if np.isnan(want) else out == want for out, want in zip(seen.values(), expected)):
    print("reproduced: llama.cpp's conventions for forbidden inputs and empty rows hold")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
