"""The repro scripts' one way to call llama.cpp's attention: ggml itself, through ctypes on the
libggml-base.so and libggml-cpu.so that llama-cpp-python ships in llama_cpp/lib (signatures as in
the vendored ggml.h), with nothing of attncheck's. flash() is the graph llama.cpp builds with flash
attention on (src/llama-graph.cpp, build_attn_mha); softmax() the one it builds without.

Layouts in NumPy's order: q [B,H,Tq,dk] float32, k [B,H_kv,Tk,dk] and v [B,H_kv,Tk,dv] float16 (the
KV cache), mask [B,1,Tq,Tk] (its values are added to the scores: 0 or -inf), sinks None or [H]
float32 (a model's attn_sinks, given with ggml_flash_attn_ext_add_sinks or ggml_soft_max_add_sinks, as
build_attn_mha gives them); out [B,H,Tq,dv] float32.
"""
import ctypes
import os

import llama_cpp
import numpy as np

F32, F16, PREC_F32 = 0, 1, 10


class _Params(ctypes.Structure):  # struct ggml_init_params
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


_lib = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
_base = ctypes.CDLL(os.path.join(_lib, "libggml-base.so"))
_cpu = ctypes.CDLL(os.path.join(_lib, "libggml-cpu.so"))
_P, _i, _f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
for _name, _res, _args in [("ggml_init", _P, [_Params]), ("ggml_free", None, [_P]),
                           ("ggml_new_tensor_4d", _P, [_P, _i] + [ctypes.c_int64] * 4), ("ggml_get_data", _P, [_P]),
                           ("ggml_permute", _P, [_P, _P, _i, _i, _i, _i]), ("ggml_cont", _P, [_P, _P]),
                           ("ggml_mul_mat", _P, [_P, _P, _P]), ("ggml_soft_max_ext", _P, [_P, _P, _P, _f, _f]),
                           ("ggml_scale", _P, [_P, _P, _f]), ("ggml_tanh", _P, [_P, _P]),
                           ("ggml_flash_attn_ext", _P, [_P, _P, _P, _P, _P, _f, _f, _f]),
                           ("ggml_prec_set_acc", ctypes.c_bool, [_P, _i]), ("ggml_new_graph", _P, [_P]),
                           ("ggml_build_forward_expand", None, [_P, _P]),
                           ("ggml_flash_attn_ext_add_sinks", None, [_P, _P]),
                           ("ggml_soft_max_add_sinks", None, [_P, _P])]:
    getattr(_base, _name).restype, getattr(_base, _name).argtypes = _res, _args
_cpu.ggml_graph_compute_with_ctx.restype, _cpu.ggml_graph_compute_with_ctx.argtypes = _i, [_P, _P, _i]
_cpu.ggml_cpu_init()


def _run(build, arrays, types, out_shape):
    """Computes build(ctx, *tensors) on one thread; its float32 data as out_shape."""
    ctx = _base.ggml_init(_Params(64 << 20, None, False))
    try:
        tensors = []
        for x, t in zip(arrays, types):
            x = np.ascontiguousarray(x, np.float32 if t == F32 else np.float16)
            tensors.append(_base.ggml_new_tensor_4d(ctx, t, *reversed(x.shape)))
            ctypes.memmove(_base.ggml_get_data(tensors[-1]), x.ctypes.data, x.nbytes)
        out = build(ctx, *tensors)
        graph = _base.ggml_new_graph(ctx)
        _base.ggml_build_forward_expand(graph, out)
        assert _cpu.ggml_graph_compute_with_ctx(ctx, graph, 1) == 0
        data = ctypes.cast(_base.ggml_get_data(out), ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(data, out_shape).copy()
    finally:
        _base.ggml_free(ctx)


def _permute(ctx, t):
    return _base.ggml_permute(ctx, t, 0, 2, 1, 3)


def _sinks(H, sinks):
    """The sinks' array and type for _run: none, or a float32 tensor ne (H, 1, 1, 1)."""
    return ([], []) if sinks is None else ([np.asarray(sinks, np.float32).reshape(1, 1, 1, H)], [F32])


def flash(q, k, v, mask, scale, softcap=0.0, sinks=None):
    """ggml_flash_attn_ext(q, k, v, mask f16, scale, 0, softcap), ggml_flash_attn_ext_add_sinks(cur, sinks)
    with sinks, at GGML_PREC_F32, as llama.cpp calls it."""
    def build(ctx, q, k, v, mask, *sinks):
        cur = _base.ggml_flash_attn_ext(ctx, _permute(ctx, q), _permute(ctx, k), _permute(ctx, v), mask, scale, 0,
                                        softcap)
        if sinks:
            _base.ggml_flash_attn_ext_add_sinks(cur, sinks[0])
        _base.ggml_prec_set_acc(cur, PREC_F32)
        return cur
    B, H, Tq, _ = q.shape
    extra, extra_types = _sinks(H, sinks)
    out = _run(build, [x.transpose(0, 2, 1, 3) for x in (q, k, v)] + [mask] + extra, [F32, F16, F16, F16] + extra_types,
               (B, Tq, H, v.shape[3]))
    return out.transpose(0, 2, 1, 3)


def softmax(q, k, v, mask, scale, softcap=0.0, cache=F16, sinks=None):
    """ggml_mul_mat(k, q) at GGML_PREC_F32, the soft-cap as llama.cpp writes it (scale, tanh, scale),
    ggml_soft_max_ext(kq, mask f32, scale, 0), ggml_soft_max_add_sinks(kq, sinks) with sinks,
    ggml_mul_mat(v^T, kq); k and v of the cache's type (F16, llama.cpp's default, or F32: -ctk f32 -ctv f32)."""
    def build(ctx, q, k, vt, mask, *sinks):
        kq = _base.ggml_mul_mat(ctx, _permute(ctx, k), _permute(ctx, q))
        _base.ggml_prec_set_acc(kq, PREC_F32)
        if softcap:
            kq = _base.ggml_scale(ctx, _base.ggml_tanh(ctx, _base.ggml_scale(ctx, kq, 1 / softcap)), softcap)
        kq = _base.ggml_soft_max_ext(ctx, kq, mask, scale, 0)
        if sinks:
            _base.ggml_soft_max_add_sinks(kq, sinks[0])
        return _base.ggml_cont(ctx, _permute(ctx, _base.ggml_mul_mat(ctx, vt, kq)))
    B, H, Tq, _ = q.shape
    extra, extra_types = _sinks(H, sinks)
    return _run(build, [q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 1, 3, 2), mask] + extra,
                [F32, cache, cache, F32] + extra_types, (B, Tq, H, v.shape[3])).transpose(0, 2, 1, 3)
