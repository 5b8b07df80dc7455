"""Without flash attention, llama.cpp computes every score q.k, the forbidden ones too, and
ggml_soft_max_ext adds the KQ mask to them: a forbidden key whose score overflows float32 to +inf
gets inf + -INFINITY = NaN, and its row (whose permitted keys are fine) becomes NaN; with that key
0 the row is right.

Here with a float32 KV cache (-ctk f32 -ctv f32), as attncheck shrank it: q 2.07691874e34, keys 0
(permitted) and 1.07374182e9 (forbidden), values 0 and 0: exact 0, the path without flash
attention gives NaN. With the default float16 cache a key past 65504 is already inf in the cache,
and 0 x inf is NaN the same way (repro_f16_cache_rounds_f32_values.py).

attncheck's finding (attncheck.adapters.llama_cpp --path softmax --cache-type f32, --dtype f32
--empty-rows nan --masked-inputs finite, seed 1, 60 s): Property.AgreesWithOracleInFloat,
"changed by a poisoned forbidden input", with the values above; also CausalPrefixIgnoresTheFuture
(a key the causal mask forbids, score -1.06e37 x -131072).

Shown with llama-cpp-python 0.3.36 (llama.cpp 0c1e570, built from the sdist on the CPU),
numpy 2.3.5 (ci/requirements-llama.txt), through ggml alone (ggml_attention.py beside this file).
Run: $ATTNCHECK_LLAMA_PYTHON examples/llama_cpp/repro_softmax_forbidden_score_overflow.py
Exit 0 while the poisoned row is NaN and the clean one 0, 1 otherwise.
"""
import sys

import numpy as np

from ggml_attention import F32, softmax

q = np.array(2.07691874e34, np.float32).reshape(1, 1, 1, 1)
k = np.array([0, 1.07374182e9], np.float32).reshape(1, 1, 2, 1)
v = np.zeros((1, 1, 2, 1), np.float32)
mask = np.array([0, -np.inf]).reshape(1, 1, 1, 2)
poisoned = softmax(q, k, v, mask.astype(np.float32), 1.0, cache=F32).item()
clean = softmax(q, np.zeros_like(k), v, mask.astype(np.float32), 1.0, cache=F32).item()
print(f"key 1 forbidden, its score {2.07691874e34 * 1.07374182e9:.3g} (inf in float32): {poisoned}; "
      f"with key 1 = 0: {clean} (exact 0 both)")
if np.isnan(poisoned) and clean == 0:
    print("reproduced: a forbidden key's overflowing score makes its row NaN without flash attention")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
