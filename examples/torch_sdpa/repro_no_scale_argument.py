"""torch 1.13's F._scaled_dot_product_attention has no scale argument: it always scales by
1/sqrt(E) (E = the query's last dim), and the public F.scaled_dot_product_attention(..., scale=)
came in 2.1. attncheck may send any problem an explicit scale (there is no capability for it), and
the adapter does not fold it into q (that would be its own arithmetic), so on 1.13 it raises
(unless the scale is 1/sqrt(dk) itself, which it then leaves to torch), and attncheck reports
"raised NotExpressible: torch 1.13.0a0's _scaled_dot_product_attention has no scale argument ..."
(Property.RowsSumToOne and every other property that draws a scale, strict contract and policies
alike; ci/conformance counts it as a limit).

Shown with torch 1.13.0a0 (Debian 12's python3-torch 1.13.1), numpy 1.24.2, CPU;
torch 2.1 and later take scale=: the script exits 1 there (2.15.0 checked).
Run: /usr/bin/python3 examples/torch_sdpa/repro_no_scale_argument.py
Exit 0 when it reproduces (no way to pass a scale), 1 when the installed torch takes scale=.
"""
import sys

import numpy as np
import torch

F = torch.nn.functional
print(f"torch {torch.__version__}, numpy {np.__version__}")
q, k, v = (torch.zeros(1, 1, 1, 2) for _ in range(3))
if hasattr(F, "scaled_dot_product_attention"):
    try:
        F.scaled_dot_product_attention(q, k, v, scale=0.25)
        print("F.scaled_dot_product_attention takes scale=: not reproduced")
        sys.exit(1)
    except TypeError as error:
        print(f"F.scaled_dot_product_attention(scale=0.25): TypeError: {error}")
        sys.exit(0)
print("F.scaled_dot_product_attention does not exist; F._scaled_dot_product_attention's docstring:")
print(F._scaled_dot_product_attention.__doc__.strip().splitlines()[0])
for call in (lambda: F._scaled_dot_product_attention(q, k, v, None, 0.0, False, False, 0.25),
             lambda: F._scaled_dot_product_attention(q, k, v, None, 0.0, False, False, scale=0.25)):
    try:
        call()
        print("it took a scale: not reproduced")
        sys.exit(1)
    except TypeError as error:
        print(f"with a scale: TypeError: {str(error).splitlines()[0]}")
print("reproduced: torch 1.13's attention takes no scale")
sys.exit(0)
