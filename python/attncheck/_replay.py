"""A kept counterexample (a replay file's case, exact bits) as a Problem, and as NumPy source a
person can paste into a test."""
import numpy as np

from . import _protocol as wire
from ._problem import Problem

_FORMATS = {"float32": ("f32", "<u4"), "float64": ("f64", "<u8"), "float16": ("f16", "<u2"), "bfloat16": ("bf16", "<u2")}


def problem_from_replay(path):
    """The problem a replay file (`attncheck-replay 2`) says the function failed on, as the Problem
    it was given: its `failed-call` lines when it has them (a property may have changed the drawn
    case: an emptied row, poisoned keys), else its case; and the property it broke."""
    lines = open(path).read().splitlines()
    if not lines or lines[0] != "attncheck-replay 2":
        raise ValueError(f"{path}: not a replay file of format 2 (its first line is not 'attncheck-replay 2')")
    split = lambda line: line.split(" ", 1) if " " in line else (line, "")
    fields = dict(split(line) for line in lines[1:])
    failed = [line[len("failed-call "):] for line in lines[1:] if line.startswith("failed-call ")]
    if failed:
        fields = dict(split(line) for line in failed) | {"property": fields.get("property", "")}
    if "case" not in fields:
        raise ValueError(f"{path}: the property draws no case, so there are no tensors to show")
    dtype, bits = _FORMATS[fields["case"].split()[0]]
    shape = fields["shape"].split()
    dims = {shape[i]: int(shape[i + 1]) for i in range(0, len(shape), 2)}
    options = fields["options"].split()
    opts = {options[i]: options[i + 1] for i in range(0, len(options), 2)}
    carries = wire.LINES  # the case text's line of each feature
    window = tuple(int(x) for x in fields.get(carries["window"], "-1 -1").split())
    rate_seed = fields[carries["dropout"]].split() if carries["dropout"] in fields else None  # "RATE SEED"
    # Each forward input (SLOTS) on the line of its feature, else of its name: a format's values as
    # their bits in hexadecimal, the others (allow, kv_lens) as integers.
    tensors = {}
    for s in wire.inputs("forward"):
        key = carries.get(s["feature"], s["name"])
        if key in fields:
            values = [int(w, 16) if s["element"] == "format" else int(w) for w in fields[key].split()]
            tensors[s["name"]] = np.array(values, bits if s["element"] == "format" else wire.storage(s, dtype)).tobytes()
    payload = wire.problem_payload(
        dtype, tuple(dims[d] for d in wire.PROBLEM_DIMS), opts["causal"], window,
        float.fromhex(opts["scale"]), float.fromhex(fields.get(carries["softcap"], "0x0p+0")),
        dropout=(float.fromhex(rate_seed[0]), int(rate_seed[1])) if rate_seed else None, **tensors)
    return Problem(payload), fields.get("property", "")


def _array(name, x, comment):
    dtype = "np.float16" if x.dtype == np.float16 else "np.float64" if x.dtype == np.float64 else \
        "bool" if x.dtype == bool else "np.int32" if x.dtype.kind == "i" else "np.float32"
    values = ", ".join(str(v) for v in x.reshape(-1))
    return f"{name} = np.array([{values}], dtype={dtype}).reshape{tuple(x.shape)}  # {comment}"


def numpy_source(p, property_name=""):
    """Problem p as Python lines that rebuild its tensors, exactly (shortest round-trip decimals)."""
    scale = "None  # 1/sqrt(dk)" if p.scale is None else repr(p.scale)
    lines = [f"# attncheck counterexample{' to Property.' + property_name if property_name else ''}: {p!r}",
             "import numpy as np",
             "nan, inf = np.nan, np.inf",
             _array("q", p.q, "[B,H,Tq,dk]" + (", bfloat16 values" if p.dtype == "bf16" else "")),
             _array("k", p.k, "[B,H_kv,Tk,dk]"),
             _array("v", p.v, "[B,H_kv,Tk,dv]"),
             _array("mask", p.mask(), "[B,H,Tq,Tk], True = may attend: allow, key lengths, causal and window"),
             f"scale = {scale}"]
    if p.softcap is not None:
        lines.append(f"softcap = {p.softcap!r}")
    if p.bias is not None:
        lines.append(_array("bias", p.bias, "[B,H,Tq,Tk], added after the soft-cap"))
    if p.dropout_p:
        lines += [f"dropout_p = {p.dropout_p!r}", f"dropout_seed = {p.dropout_seed}  # the function's own random stream"]
    return "\n".join(lines)
