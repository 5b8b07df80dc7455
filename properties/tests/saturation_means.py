#!/usr/bin/python3
"""The expected values behind the thresholds of properties/unscaled_softmax_saturates_as_d_grows.cpp
and properties/scaled_softmax_stays_put_as_d_grows.cpp, by simulation.

For N queries over 32 keys, q and k Gaussian in dimension d, scaled (q.k / sqrt(d)) or not: the
mean largest weight and the mean 1 - sum p^2, each over 2x10^4 queries (standard error below
0.003), and each threshold's distance from them. The properties' false-alarm probability,
exp(-2 * 1024 * gap^2) by Hoeffding, needs every gap at least 0.13 (1e-15 per check).

    /usr/bin/python3 properties/tests/saturation_means.py
"""
import numpy as np

KEYS, DRAWS = 32, 20000
# (d, scaled): (largest weight must be below / above, 1 - sum p^2 must be above / below)
CHECKS = {
    (4, False): ("<", 0.5, ">", 0.65),
    (256, False): (">", 0.75, "<", 0.28),
    **{(d, True): ("<", 0.3, ">", 0.79) for d in (4, 16, 64, 256)},
}

rng = np.random.default_rng(2026)
smallest = 1.0
for (d, scaled), (op1, t1, op2, t2) in CHECKS.items():
    largest, trace = [], []
    for _ in range(DRAWS // 1000):
        q = rng.standard_normal((1000, d))
        k = rng.standard_normal((1000, KEYS, d))
        s = np.einsum("nd,nkd->nk", q, k) / (np.sqrt(d) if scaled else 1)
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        largest.append(p.max(1))
        trace.append(1 - (p * p).sum(1))
    m1, m2 = np.concatenate(largest).mean(), np.concatenate(trace).mean()
    gap1 = (t1 - m1) if op1 == "<" else (m1 - t1)
    gap2 = (t2 - m2) if op2 == "<" else (m2 - t2)
    smallest = min(smallest, gap1, gap2)
    print(f"d {d:3d} {'scaled  ' if scaled else 'unscaled'}: largest weight {m1:.4f} (must be {op1} {t1}, gap {gap1:.3f}), "
          f"1 - sum p^2 {m2:.4f} (must be {op2} {t2}, gap {gap2:.3f})")
print(f"smallest gap {smallest:.3f}: false alarm below exp(-2 1024 gap^2) = {np.exp(-2 * 1024 * smallest**2):.1e} per check")
