"""attncheck's rule for an element against the oracle, in NumPy alone: what a regression test
written by `attncheck repro` checks with (a standalone one pastes this file whole)."""
import numpy as np


def outside_bound(out, exact_hi, exact_lo, bound, name="out", infinities_exact=False):
    """The elements of a tensor outside attncheck's bound, as lines a person reads; attncheck's rule
    (its compare.hpp, within_bound): a bound of +inf is not checked; an exact NaN needs NaN; an exact
    infinity needs that infinity (or NaN, in out); else finite and within the bound of hi + lo."""
    wrong = []
    for at in np.ndindex(out.shape):
        x, b = out[at], bound[at]
        e = np.longdouble(exact_hi[at]) + np.longdouble(exact_lo[at])
        if np.isinf(b):
            continue
        if np.isnan(e):
            right = np.isnan(x)
        elif np.isinf(e):
            right = x == e or (np.isnan(x) and not infinities_exact)
        else:
            right = np.isfinite(x) and abs(np.longdouble(x) - e) <= b
        if not right:
            wrong.append(f"{name}{list(at)} = {x!r}, exact {float(e)!r}, bound {b!r}")
    return wrong
