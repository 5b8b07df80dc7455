"""llama.cpp keeps K and V in its KV cache, float16 by default (-ctk/-ctv f16): a float32 model's
keys and values are rounded to float16 when stored, and with flash attention even a float32
cache is cast to float16 (build_attn_mha's ggml_cast). So a float32 attention through llama.cpp
carries float16's rounding (2^-11 relative) and range (a value past 65504 becomes inf): one key,
value 0.414777547 (float32), gives 0.414794922; value -2.12676479e37 gives -inf.

attncheck's findings (attncheck.adapters.llama_cpp, --dtype f32, the default f16 cache, seed 1,
60 s): --path softmax, Property.AgreesWithOracleInFloat, Tq 1, Tk 1, v 0.414777547: 0.414794922,
234 times the float32 bound; --path flash, Property.DefaultScaleIsOneHeadsWidth, v -2.12676479e37:
-inf. What llama.cpp documents as the cache's type, not a bug: the adapter's --cache-type f32
(-ctk f32 -ctv f32) keeps float32 without flash attention.

Shown with llama-cpp-python 0.3.36 (llama.cpp 0c1e570, built from the sdist on the CPU),
numpy 2.3.5 (ci/requirements-llama.txt), through ggml alone (ggml_attention.py beside this file).
Run: $ATTNCHECK_LLAMA_PYTHON examples/llama_cpp/repro_f16_cache_rounds_f32_values.py
Exit 0 while both are rounded as float16 rounds them, 1 otherwise.
"""
import sys

import numpy as np

from ggml_attention import flash, softmax

q, k, mask = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.float16), np.zeros((1, 1, 1, 1))
small = softmax(q, k, np.array(0.414777547, np.float16).reshape(1, 1, 1, 1), mask.astype(np.float32), 1.0).item()
with np.errstate(over="ignore"):  # the cache's store, f32 to f16 rounding to nearest as ggml's conversion does
    v_stored = np.array(-2.12676479e37, np.float32).astype(np.float16).reshape(1, 1, 1, 1)
large = flash(q, k, v_stored, mask.astype(np.float16), 1.0).item()
print(f"one key, v 0.414777547 (float32): {small!r}; v -2.12676479e37: {large!r}")
if small == float(np.float16(0.414777547)) and small != float(np.float32(0.414777547)) and large == -np.inf:
    print("reproduced: the f16 KV cache rounds a float32 model's values to float16")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
