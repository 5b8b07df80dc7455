"""The adapters' tests' one way to make a Problem by hand: as the checker sends it, through the
protocol's own payload (q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], allow [B,Tq,Tk] True = may
attend, kv_lens [B], bias [B,H,Tq,Tk], dropout (p, seed), sinks [H] float32; bf16 values as float32 holding
bf16 values)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
from attncheck import _protocol as wire  # noqa: E402
from attncheck._problem import Problem  # noqa: E402


def problem(q, k, v, dtype="f32", causal="none", window=None, scale=0.0, softcap=0.0, allow=None, kv_lens=None,
            bias=None, want_lse=False, dropout=None, want_keep=False, sinks=None):
    """A Problem as the checker sends it (through the protocol's own payload)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    storage = np.dtype(wire.STORAGE[dtype])
    encode = (lambda x: wire.to_bf16_bits(np.asarray(x, np.float32)).tobytes()) if dtype == "bf16" else \
        (lambda x: np.asarray(x).astype(storage).tobytes())
    B, H, Tq, dk = q.shape
    _, H_kv, Tk, dv = v.shape
    payload = wire.problem_payload(
        dtype, (B, H, H_kv, Tq, Tk, dk, dv), causal, window, scale, softcap, q=encode(q), k=encode(k), v=encode(v),
        allow=None if allow is None else np.asarray(allow, np.uint8).tobytes(),
        kv_lens=None if kv_lens is None else np.asarray(kv_lens, "<i4").tobytes(),
        bias=None if bias is None else encode(bias), want_lse=want_lse, dropout=dropout, want_keep=want_keep,
        sinks=None if sinks is None else np.asarray(sinks, "<f4").tobytes())
    return Problem(payload)


def refusal(library, older, run, capsys, monkeypatch):
    """What an adapter says when its library is the release `older`: `run` (that imports the adapter's
    library again: importlib.reload of its module, or its load()) with library.__version__ = older must
    exit 2 with one line on stderr, returned. The version is put back after."""
    import pytest
    with monkeypatch.context() as patch:
        patch.setattr(library, "__version__", older)
        with pytest.raises(SystemExit) as stopped:
            run()
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and said.count("\n") == 1 and said.endswith("\n"), said
    return said


def reload_refuses(adapter, library, older, capsys, monkeypatch):
    """refusal() by reloading the adapter module, which is then reloaded again with the real version."""
    import importlib
    try:
        return refusal(library, older, lambda: importlib.reload(adapter), capsys, monkeypatch)
    finally:
        importlib.reload(adapter)
