"""torch 1.13's F._scaled_dot_product_attention(q, k, v, mask, dropout_p, need_attn_weights=True)
follows attncheck's dropout contract: dropout after the softmax over every permitted key, each kept
weight multiplied by 1/(1-p) (held in the tensor's dtype: in bf16 1.109375 for p = 0.1) and each
dropped one 0, out = weights @ v exactly, the weights it returns those after dropout, one mask per
torch.manual_seed, a kept fraction near 1 - p. No dropout deviation: attncheck's five dropout
properties (--dtype f32, 60 s) report only a forbidden key whose score overflows to inf giving
inf + -inf = NaN through the additive mask, the cause repro_forbidden_inputs_leak.py shows
without dropout; in bf16 also the bf16 scores of repro_bf16_scores_rounded.py.

Shown with torch 1.13.0a0 (Debian 12's python3-torch 1.13.1), CPU.
Run: /usr/bin/python3 examples/torch_sdpa/repro_dropout_as_the_contract.py
Exit 0 when every fact holds, 1 (naming it) otherwise.
"""
import sys

import torch

F = torch.nn.functional
torch.set_num_threads(1)
print(f"torch {torch.__version__}")
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(2, 2, T, 4, dtype=torch.float64, generator=g) for T in (64, 64, 64))
allow = torch.rand(1, 1, 64, 64, generator=g) > 0.3
p = 0.3
facts = {}
for dt in (torch.float64, torch.float32, torch.bfloat16):
    Q, K, V = q.to(dt), k.to(dt), v.to(dt)
    torch.manual_seed(5)
    out, w = F._scaled_dot_product_attention(Q, K, V, allow, p, True, False)
    _, w0 = F._scaled_dot_product_attention(Q, K, V, allow, 0.0, True, False)
    kept = w != 0
    facts[f"{dt}: each kept weight is the undropped one times 1/(1-p) in {dt}"] = torch.equal(
        w[kept], (w0 * torch.tensor(1 / (1 - p), dtype=dt))[kept])
    facts[f"{dt}: each dropped weight is 0, forbidden keys too"] = bool((w[~kept] == 0).all() and (w[..., ~allow[0, 0]] == 0).all())
    facts[f"{dt}: out is the dropped weights times v, exactly"] = torch.equal(out, w @ V)
    fraction = kept[..., allow[0, 0]].double().mean().item()
    facts[f"{dt}: kept fraction {fraction:.3f} of the permitted weights within 0.02 of 1 - p"] = abs(fraction - (1 - p)) < 0.02
torch.manual_seed(5)
out, w = F._scaled_dot_product_attention(q, k, v, None, p, True, False)
torch.rand(100)
torch.manual_seed(5)
again, w_again = F._scaled_dot_product_attention(q, k, v, None, p, True, False)
facts["one seed, the same out and weights, whatever was drawn before"] = torch.equal(out, again) and torch.equal(w, w_again)
torch.manual_seed(6)
_, other = F._scaled_dot_product_attention(q, k, v, None, p, True, False)
agree = ((w != 0) == (other != 0)).double().mean().item()
facts[f"another seed, another mask (agreement {agree:.3f}, independent {p * p + (1 - p) ** 2:.3f})"] = agree < 0.62
heads = ((w[0, 0] != 0) == (w[0, 1] != 0)).double().mean().item()
facts[f"two heads' masks independent (agreement {heads:.3f})"] = heads < 0.62
for fact, holds in facts.items():
    print(("holds: " if holds else "FAILS: ") + fact)
sys.exit(0 if all(facts.values()) else 1)
