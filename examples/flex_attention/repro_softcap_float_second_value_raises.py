"""torch 2.15's flex_attention, called without torch.compile on the CPU, raises on the second call
whose score_mod captures a Python float of another value: the tanh soft-cap written as
FlexAttention's blog post writes it (`soft_cap * tanh(score / soft_cap)`, soft_cap a float the
function closes over). The first value runs; from the second on, dynamo (which flex_attention runs
its operator through, with the "eager" backend) recompiles with the float made dynamic, a SymFloat,
and the higher-order operator refuses it: "TorchRuntimeError: RuntimeError when making fake tensor
call ... got AssertionError("(zf..,) can only be of (<class 'torch.Tensor'>, <class 'int'>, <class
'torch.SymInt'>) but got (<class 'torch.SymFloat'>,)")". The same soft-caps captured as 0-dim tensors
run (what the attncheck adapter passes). The inference about dynamic floats is from the message.

attncheck's finding (flex_attention with the soft-cap as a float, --dtype f32, 200 cases, seed 1,
kind "raised", fails only with soft-cap): Property.RowsSumToOne, shrunk to B 1, H 1, Tq 1, Tk 1,
dk 1, dv 1, soft-cap 2, q = k = 0, v = 1.

The case: q = k = 0 [1,1,1,1], v = 1: out = 1 at any soft-cap; soft-caps 1, 2, 3 in turn.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), numpy 2.3.5, float32.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_softcap_float_second_value_raises.py
Exit 0 when it reproduces, 1 otherwise.
"""
import sys
import warnings

import torch

print(f"torch {torch.__version__}")
try:
    from torch.nn.attention.flex_attention import flex_attention
except ImportError:
    print("no torch.nn.attention.flex_attention: not reproduced")
    sys.exit(1)
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.set_num_threads(1)
q, k, v = torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1), torch.ones(1, 1, 1, 1)


def softcapped(soft_cap):
    return lambda score, b, h, q_idx, kv_idx: soft_cap * torch.tanh(score / soft_cap)


def run(soft_cap):
    try:
        return flex_attention(q, k, v, score_mod=softcapped(soft_cap)).item()
    except Exception as e:  # noqa: BLE001 (what it raises is the finding)
        text = str(e)
        return f"{type(e).__name__}: {text.splitlines()[0]}" + (" (... SymFloat ...)" if "SymFloat" in text else "")


floats = [run(c) for c in (1.0, 2.0, 3.0)]
tensors = [run(torch.tensor(c)) for c in (1.0, 2.0, 3.0)]
for c, f, t in zip((1, 2, 3), floats, tensors):
    print(f"soft-cap {c}: as a float {f}; as a 0-dim tensor {t} (the contract: 1)")
if floats[0] == 1 and all(isinstance(f, str) and "SymFloat" in f for f in floats[1:]) and tensors == [1, 1, 1]:
    print("reproduced: a captured float soft-cap raises from its second value on")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
