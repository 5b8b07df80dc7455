"""ONNX Runtime's CPU com.microsoft.MultiHeadAttention with unidirectional = 1 and fewer queries
than keys (Tq < Tk, no past state) masks queries 0 .. Tq - 2 upper-left (query i sees keys
j <= i) but lets the last query see every key: neither alignment of a causal mask (upper-left:
j <= i; lower-right: j <= i + Tk - Tq). With Tq == Tk and with Tq > Tk it is upper-left
throughout, as the attribute's text ("every token can only attend to previous tokens") reads.

attncheck's findings (--op mha, which sends upper-left causal as unidirectional = 1; both "fails
only with: causal", accepted under no policy): Property.OutputsLieBetweenPermittedValues, shrunk to
B 1, H 1, Tq 1, Tk 2, q 0, k (0, 0), v (0, -1): out -0.5 where query 0 may see key 0 alone (0), and
Property.AllTrueMaskEqualsNoMask (Tq 1, Tk 1024: 5.02e6 times the bound). With Tq = 1 the one
query is the last, and sees every key.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_mha_unidirectional_last_query_sees_every_key.py
Exit 0 while it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def mha_weights(Tq, Tk):
    """The weights of one head (q = k = 0: equal scores) read off through one-hot values."""
    q = np.zeros((1, Tq, 1), np.float32)
    k = np.zeros((1, Tk, 1), np.float32)
    v = np.eye(Tk, dtype=np.float32).reshape(1, Tk, Tk)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
              for n, x in (("query", q), ("key", k), ("value", v))]
    node = helper.make_node("MultiHeadAttention", ["query", "key", "value"], ["output"], domain="com.microsoft",
                            num_heads=1, unidirectional=1)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, Tq, Tk])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)],
                          ir_version=10)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"query": q, "key": k, "value": v})[0][0]


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
reproduced = 0
for Tq, Tk in ((2, 4), (3, 5)):
    seen = mha_weights(Tq, Tk) > 0
    i, j = np.arange(Tq)[:, None], np.arange(Tk)[None, :]
    print(f"Tq {Tq}, Tk {Tk}, unidirectional 1: keys each query sees (rows: queries)")
    for row in seen.astype(int).tolist():
        print("   ", row)
    upper_left, lower_right = j <= i, j <= i + Tk - Tq
    observed = upper_left.copy()
    observed[-1] = True  # the last query sees every key
    reproduced += bool((seen == observed).all() and (seen != upper_left).any() and (seen != lower_right).any())
for Tq, Tk in ((3, 3), (4, 2)):  # square and Tq > Tk: upper-left
    i, j = np.arange(Tq)[:, None], np.arange(Tk)[None, :]
    reproduced += bool(((mha_weights(Tq, Tk) > 0) == (j <= i)).all())
print("reproduced" if reproduced == 4 else f"not reproduced ({reproduced} of 4)")
sys.exit(0 if reproduced == 4 else 1)
