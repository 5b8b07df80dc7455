"""attncheck's Python client: check attention written in Python with attncheck's campaign.

    import attncheck
    def forward(p):               # p: attncheck.Problem (NumPy arrays)
        ...
        return out                # [B,H,Tq,dv]; (out, lse) when p.want_lse, (out, keep) when p.want_keep
    attncheck.serve(forward, capabilities={"f32", "allow", "causal"})  # under attncheck check --impl-cmd
    attncheck.serve(forward, capabilities={"f32", "causal"},       # narrow code says what it takes:
                    restrictions=["causal", "square", "default_scale", "equal_head_dims"])
    attncheck.check(forward)      # from pytest: the whole campaign, AssertionError on a finding

    def layer(m):                 # m: attncheck.Layer (x_q, w_q, ..., NumPy arrays; docs/protocol.md "A layer call")
        ...
        return out                # [B,Tq,D]; (out, weights [B,H,Tq,Tk]) when m.want_weights
    attncheck.serve(layer=layer, capabilities={"f32", "causal", "mha"})  # a layer-only function

See the README's "Checking Python code" and docs/protocol.md.
"""
from ._adapters import masked
from ._check import check, find_binary
from ._bound import outside_bound
from ._command import run_command
from ._layer import Layer
from ._problem import Problem
from ._protocol import CAPABILITIES
from ._replay import numpy_source, problem_from_replay
from ._features import RESTRICTIONS
from ._serve import NotExpressible, serve

__all__ = ["CAPABILITIES", "Layer", "NotExpressible", "Problem", "RESTRICTIONS", "check", "find_binary", "masked",
           "numpy_source", "outside_bound", "problem_from_replay", "run_command", "serve"]
