"""ONNX Runtime's CPU com.microsoft.Attention dies of SIGSEGV when its optional `bias` input is
left out (onnxruntime issue 25005, "Attention Contrib Op Bias argument Not optional?", open): the
schema lists bias as optional (inputs input, weights, and optionally bias, mask_index, ...), the
session is made without complaint, and the run crashes the process, whatever the shapes. With a
zero bias given instead the same layer agrees with a float64 NumPy computation.

attncheck's consequence: python -m attncheck.adapters.onnxruntime_attention always passes the
packed bias (zeros for the biases a layer call lacks: the layer's own rule), so a bias-free layer
call is checked instead of crashing the child.

Shown with onnxruntime 1.30.0, onnx 1.21.0, numpy 1.26.4, CPU execution provider. Fixed upstream: not
reproduced on onnxruntime 1.32.0, onnx 1.23.2, numpy 2.3.5 (ci/requirements.txt), where the run without
bias agrees with NumPy; ctest checks that it stays so.
Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime_attention/repro_no_bias_segfault.py
Exit 0 while it reproduces (the run without bias crashes), 1 when it runs, 2 without onnxruntime.
"""
import signal
import subprocess
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError as error:
    print(f"needs onnx and onnxruntime: {error}")
    sys.exit(2)

B, S, D, H = 1, 3, 4, 2


def attention(x, w, b=None):
    """com.microsoft.Attention's output [B,S,D] for input x [B,S,D], weights w [D,3D], bias b or none."""
    feeds = {"input": x, "weights": w} if b is None else {"input": x, "weights": w, "bias": b}
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape)) for n, v in feeds.items()]
    node = helper.make_node("Attention", list(feeds), ["output"], domain="com.microsoft", num_heads=H)
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([node], "g", inputs, [out]), ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def numpy_attention(x, w):
    q, k, v = (a.reshape(B, S, H, D // H).transpose(0, 2, 1, 3) for a in np.split(x.astype(np.float64) @ w, 3, -1))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, S, D)


rng = np.random.default_rng(0)
x = rng.standard_normal((B, S, D)).astype(np.float32)
w = rng.standard_normal((D, 3 * D)).astype(np.float32)

if sys.argv[1:] == ["--child"]:  # the run without bias, in a process of its own
    out = attention(x, w)
    print(f"max |error| vs float64 NumPy {np.abs(out - numpy_attention(x, w)).max():.2g}")
    sys.exit(0)

print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
with_zero_bias = attention(x, w, np.zeros(3 * D, np.float32))
print(f"bias given (zeros): max |error| vs float64 NumPy {np.abs(with_zero_bias - numpy_attention(x, w)).max():.2g}")
child = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True)
if child.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV):
    print("bias left out: the process died of SIGSEGV")
    print("reproduced: the optional bias is not optional on the CPU")
    sys.exit(0)
print(f"bias left out: exit status {child.returncode}; {child.stdout.strip()} {child.stderr.strip()[-300:]}")
print("not reproduced")
sys.exit(1)
