"""llama.cpp's attention on the CPU (ggml, as llama-cpp-python ships it), as a child of `attncheck check --impl-cmd`.

    attncheck check --impl-cmd "VENV_PYTHON -m attncheck.adapters.llama_cpp [--path flash|softmax] [--cache-type f16|f32]"

VENV_PYTHON: the venv ci/lib.sh's ensure_venvs makes from ci/requirements-llama.txt
(llama-cpp-python 0.3.36 built from its sdist, which vendors llama.cpp at commit 0c1e570;
ATTNCHECK_LLAMA_PYTHON). llama_cpp's own bindings wrap llama.h, not ggml's operators (its _ggml
module loads libggml for logging alone), so the adapter declares the few ggml functions it calls
with ctypes, on the libggml-base.so and libggml-cpu.so in llama_cpp/lib, each signature as in that
commit's ggml.h and ggml-cpu.h. Each problem becomes one ggml graph built as
llm_graph_context::build_attn_mha (src/llama-graph.cpp) builds a layer's attention, computed by
ggml_graph_compute_with_ctx on one thread; the output is returned as ggml gives it (float32), with
no masking, scaling, NaN handling or re-computation of the adapter's own.

  --path flash    (default; llama.cpp's -fa on) cur = ggml_flash_attn_ext(q, k, v, kq_mask,
                  kq_scale, max_bias, logit_softcap), with sinks ggml_flash_attn_ext_add_sinks(cur,
                  sinks), then ggml_prec_set_acc(cur, GGML_PREC_F32), as llama.cpp does (n_kv_max 0,
                  build_attn's).
  --path softmax  (-fa off) kq = ggml_mul_mat(k, q) with ggml_prec_set_acc(kq, GGML_PREC_F32); with a
                  soft-cap, kq = ggml_scale(ggml_tanh(ggml_scale(kq, 1/softcap)), softcap) as
                  build_attn_mha writes it; kq = ggml_soft_max_ext(kq, kq_mask, kq_scale, max_bias),
                  with sinks ggml_soft_max_add_sinks(kq, sinks); out = ggml_mul_mat(v, kq) with v the
                  transposed cache's layout, then ggml_cont(ggml_permute(out, 0, 2, 1, 3)). Note:
                  here kq_scale multiplies the soft-capped scores (softcap tanh(q.k/softcap) x
                  scale), while ggml_flash_attn_ext caps the scaled ones (softcap tanh(scale
                  q.k/softcap), attncheck's order): the two agree only when the scale is 1, which is
                  what llama.cpp's soft-capped models pass (Gemma 2 scales q beforehand). The
                  adapter passes the problem's scale as kq_scale.

How each feature of a problem reaches ggml:

  q, k, v     q a float32 tensor [dk, H, Tq, B] (ggml's ne, fastest first: the projection's layout,
              one stream per batch entry) permuted (0, 2, 1, 3); k and v in a KV cache as llama.cpp
              keeps it, [dk, H_kv, kv_size, B] (one stream per batch entry; kv_size the next multiple
              of 256 above Tk, the cells past the problem's Tk keys stale: NaN), read through views
              of the Tk used cells as llama_kv_cache::get_k and get_v make them (ggml_view_4d over
              the cache's strides), permuted likewise; for --path softmax v is the transposed cache
              (llama.cpp's v_trans when flash attention is off), [kv_size, dv, H_kv, B], whose view
              is [Tk, H_kv, dv, B] with strides kv_size dv and kv_size, permuted back by build_attn_mha. dv != dk is
              claimed (ggml takes DK != DV, llama.cpp's MLA).
  cache type  --cache-type f16 (default, llama.cpp's -ctk/-ctv default): k and v are float16 tensors.
              An f16 problem fits exactly (q float32 holding f16 values); an f32 problem's k and v
              are rounded to float16 when stored, as llama.cpp stores them (attncheck then reports
              that rounding; ggml also converts q to float16 for its products with a float16 K, the
              type's vec_dot_type). --cache-type f32: float32 tensors; the flash path casts them to
              f16 itself (build_attn_mha's ggml_cast), the softmax path multiplies them as they are.
  formats     f32 and f16 (the output, float32, is encoded in the problem's format by the client).
              Not claimed: bf16 (a -ctk bf16 cache; not wired), f64 (ggml has no f64 attention).
  scale       kq_scale, a C float: the problem's scale rounded to float32, or 1/sqrt(dk) when it
              says default (llama.cpp's 1.0f/sqrtf(float(n_embd_head)) for most models).
  masks       llama.cpp's KQ mask, [Tk, Tq, 1, B] (float16 for flash attention, float32 otherwise,
              as llama.cpp allocates it; no padding in this version): 0 where a key is permitted,
              -INFINITY where not, as llama.cpp fills it. The allow mask, key lengths, causal and the
              window (p.mask()) are all written into it; ggml has no other masking. llama.cpp's own
              causal rule is by the cells' positions: a decode step's query at position
              kv_lens[b] - Tq + i sees the cells up to it, which is KV-end causal (kv_cache, claimed);
              lower-right is the same at a full cache, upper-left is positions from 0. Without any, the mask is all 0 (llama.cpp
              always passes one).
  bias        --path softmax only. Translated: ggml_soft_max_ext adds its mask to the scaled,
              soft-capped scores ("soft_max(a*scale + mask*(ALiBi slope))", ggml.h; slope 1
              without ALiBi), so a bias becomes the mask's values, [Tk, Tq, H, B] (ggml broadcasts a
              mask over H / ne2 heads), -INFINITY where forbidden. llama.cpp itself fills the mask
              with 0, -INFINITY or ALiBi's -|i - j|, and adds a model's attention bias (kq_b) to the
              scores before the scale; with one it never runs flash attention (build_attn_mha:
              use_flash_attn = flash_attn && kq_b == nullptr), so --path flash claims no bias.
  gqa         k and v with H_kv heads: ggml broadcasts them, query head h reads KV head h / (H / H_kv).
  softcap     logit_softcap (flash) or the ggml_scale/ggml_tanh/ggml_scale above (softmax).
  max_bias    ALiBi (llama.cpp's f_max_alibi_bias, the mask times a slope per head): no attncheck
              feature; 0 in a campaign, tested by hand (test_llama_cpp.py).
  sinks       the problem's float32 [H] as a float32 tensor [H] (ne (H, 1, 1, 1); a model's attn_sinks,
              gpt-oss's), given to ggml as build_attn_mha gives it: ggml_flash_attn_ext_add_sinks(cur,
              sinks) after ggml_flash_attn_ext, or ggml_soft_max_add_sinks(kq, sinks) after
              ggml_soft_max_ext; ggml neither scales, soft-caps nor masks it (its CPU kernels take
              the sink into the row's max and add exp(sink - max) to its sum). Claimed on a path
              where libggml-base exports its function and a 1-element problem with a sink runs
              (llama.cpp 0c1e570: both paths).
  not claimed lse (ggml returns the output alone), backward, dropout.

Nothing is refused: no restriction is declared and no problem raises NotExpressible.

What attncheck finds (llama-cpp-python 0.3.36, seed 1, 60 s per format and path; each shown with
ggml alone by examples/llama_cpp/repro_*.py, exit 0 while it reproduces):
  flash       below 64 query rows (the one-chunk path, decoding) the weighted sum of V is kept in
              float16 though llama.cpp asks for GGML_PREC_F32: two values 32768 give inf, and
              values carry float16's rounding (repro_flash_v_accumulated_in_f16.py).
  softmax     kq_scale multiplies the soft-capped score (repro_softmax_path_scales_after_the_softcap.py);
              a forbidden key whose score overflows to +inf makes its row NaN (inf + -INFINITY;
              repro_softmax_forbidden_score_overflow.py).
  f32         the f16 cache rounds K and V, a value past 65504 is inf (repro_f16_cache_rounds_f32_values.py).
  sinks       a sink of -inf (the contract's "no sink") makes a row with no permitted key NaN, on both
              paths (flash attention gives 0 for it without a sink): the row's max stays -inf and the
              sink's term is exp(-inf - -inf) (repro_sink_of_minus_inf_on_an_empty_row.py;
              SinksAgreeWithOracle, accepted under --empty-rows nan). A finite sink gives 0 there.

llama.cpp's conventions on the CPU, to check it under (test_llama_cpp.py checks each;
repro_forbidden_inputs_and_empty_rows.py):
  empty rows     flash attention gives 0 (the contract's own); without it NaN (--empty-rows nan); with
                 a finite sink 0 on both paths, with a sink of -inf NaN on both.
  masked inputs  without flash attention, and with it from 64 query rows on (the tiled path), a NaN
                 or inf in a forbidden key or value reaches its row (--masked-inputs finite).
"""
import argparse
import ctypes
import math
import os

import numpy as np

from . import library, serve

# The ggml signatures declared below are those of the llama.cpp that llama-cpp-python 0.3.36 vendors
# (commit 0c1e570); ctypes cannot check an older library's, so an older release is refused.
llama_cpp = library("llama_cpp", "llama_cpp", since="0.3.36")

F32, F16 = 0, 1  # enum ggml_type
PREC_F32 = 10  # enum ggml_prec
TYPES = {"f32": (F32, np.float32), "f16": (F16, np.float16)}


class InitParams(ctypes.Structure):
    """struct ggml_init_params."""
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def _bind():
    """libggml-base and libggml-cpu from llama_cpp/lib, the functions used declared as in ggml.h."""
    lib = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    base = ctypes.CDLL(os.path.join(lib, "libggml-base.so"))
    cpu = ctypes.CDLL(os.path.join(lib, "libggml-cpu.so"))
    P, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
    signatures = {
        "ggml_init": (base, P, [InitParams]), "ggml_free": (base, None, [P]),
        "ggml_new_tensor_4d": (base, P, [P, i32, i64, i64, i64, i64]), "ggml_get_data": (base, P, [P]),
        "ggml_permute": (base, P, [P, P, i32, i32, i32, i32]), "ggml_cont": (base, P, [P, P]),
        "ggml_view_4d": (base, P, [P, P, i64, i64, i64, i64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                                   ctypes.c_size_t]),
        "ggml_cast": (base, P, [P, P, i32]), "ggml_mul_mat": (base, P, [P, P, P]),
        "ggml_scale": (base, P, [P, P, f32]), "ggml_tanh": (base, P, [P, P]),
        "ggml_soft_max_ext": (base, P, [P, P, P, f32, f32]),
        "ggml_flash_attn_ext": (base, P, [P, P, P, P, P, f32, f32, f32]),
        "ggml_prec_set_acc": (base, ctypes.c_bool, [P, i32]),
        "ggml_new_graph": (base, P, [P]), "ggml_build_forward_expand": (base, None, [P, P]),
        "ggml_cpu_init": (cpu, None, []), "ggml_graph_compute_with_ctx": (cpu, i32, [P, P, i32]),
    }
    optional = {  # sinks (gpt-oss's): void f(struct ggml_tensor * a, struct ggml_tensor * sinks), None if absent
        "ggml_flash_attn_ext_add_sinks": (base, None, [P, P]), "ggml_soft_max_add_sinks": (base, None, [P, P]),
    }
    functions = {}
    for name, (where, restype, argtypes) in {**signatures, **optional}.items():
        fn = getattr(where, name, None)
        if fn is None and name in optional:
            functions[name] = None
            continue
        fn.restype, fn.argtypes = restype, argtypes
        functions[name] = fn
    return argparse.Namespace(**{name[len("ggml_"):]: fn for name, fn in functions.items()})


ggml = _bind()
ggml.cpu_init()


def attention(q, k, v, mask, scale, path="flash", cache="f16", softcap=0.0, max_bias=0.0, sinks=None):
    """llama.cpp's attention of q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] (NumPy) with the KQ
    mask [B,1 or H,Tq,Tk] (its values added to the scores) and sinks None or [H] (a float32 tensor
    [H], as a model's attn_sinks), as build_attn_mha computes it: out [B,H,Tq,dv] float32."""
    B, H, Tq, _ = q.shape
    dv = v.shape[3]
    k_cache, v_cache = kv_cache(k, v, path)
    inputs = [(q.transpose(0, 2, 1, 3), "f32"), (k_cache, cache), (v_cache, cache),
              (mask, "f16" if path == "flash" else "f32")]  # ne reversed: q (dk, H, Tq, B), the projection's
    if sinks is not None:
        inputs.append((np.asarray(sinks).reshape(1, 1, 1, H), "f32"))  # ne (H, 1, 1, 1)
    with np.errstate(over="ignore"):  # storing in the f16 cache: past 65504 is inf, as ggml's conversion gives
        inputs = [(np.ascontiguousarray(x, TYPES[t][1]), TYPES[t][0]) for x, t in inputs]
    scores = B * H * Tq * mask.shape[-1] * (24 if path == "softmax" else 0)  # five f32 score tensors, an f16 copy
    size = sum(x.nbytes for x, _ in inputs) * 4 + B * H * Tq * (q.shape[3] + v.shape[2] + dv) * 16 + scores + (1 << 22)
    ctx = ggml.init(InitParams(size, None, False))
    if not ctx:
        raise MemoryError(f"ggml_init could not allocate {size} bytes")
    try:
        qt, kt, vt, mt, *st = (_tensor(ctx, x, t) for x, t in inputs)
        kt = _used_cells(ctx, kt, inputs[1][0], k.shape[2], transposed=False)
        vt = _used_cells(ctx, vt, inputs[2][0], k.shape[2], transposed=path == "softmax")
        # q and k permuted (0, 2, 1, 3) by build_attn_mha; v too (flash); the transposed cache's view is get_v's
        qt, kt = (ggml.permute(ctx, t, 0, 2, 1, 3) for t in (qt, kt))
        vt = ggml.permute(ctx, vt, 0, 2, 1, 3) if path == "flash" else vt
        branch = _flash if path == "flash" else _softmax
        out = branch(ctx, qt, kt, vt, mt, scale, softcap, max_bias, st[0] if st else None)
        return _compute(ctx, out, (B, Tq, H, dv)).transpose(0, 2, 1, 3)  # ne (dv, H, Tq, B)
    finally:
        ggml.free(ctx)


def kv_cache(k, v, path):
    """The KV cache as llama.cpp keeps it, one stream per batch entry: k [B,kv_size,H_kv,dk] (ne (dk,
    H_kv, kv_size, B): a cell's heads side by side), v likewise, or transposed without flash attention
    ([B,H_kv,dv,kv_size], v_trans); the problem's Tk keys in cells 0 .. Tk-1 and the cells after them
    stale (NaN), up to kv_size, the next multiple of 256 above Tk: llama.cpp reads a cache through
    views of its used cells (get_k, get_v), so a stale cell must never reach an output."""
    B, H_kv, Tk, _ = k.shape
    cells = (Tk // 256 + 1) * 256

    def cache(used, axis):  # used: the keys' rows in the cache's layout, Tk along `axis`
        shape = list(used.shape)
        shape[axis] = cells
        full = np.full(shape, np.nan)
        full[(slice(None),) * axis + (slice(0, Tk),)] = used
        return full
    k_cache = cache(k.transpose(0, 2, 1, 3), 1)
    v_cache = cache(v.transpose(0, 2, 1, 3), 1) if path == "flash" else cache(v.transpose(0, 1, 3, 2), 3)
    return k_cache, v_cache


def _used_cells(ctx, tensor, array, Tk, transposed):
    """The view of a cache tensor's first Tk cells, as llama_kv_cache::get_k and get_v make it
    (src/llama-kv-cache.cpp): ne (d, H_kv, Tk, B) over the cache's own strides, or for the
    transposed V cache ne (Tk, H_kv, dv, B) with nb1 = kv_size dv, nb2 = kv_size (cells fastest)."""
    item = array.itemsize
    if not transposed:
        B, cells, H_kv, d = array.shape
        return ggml.view_4d(ctx, tensor, d, H_kv, Tk, B, item * d, item * d * H_kv, item * d * H_kv * cells, 0)
    B, H_kv, dv, cells = array.shape
    return ggml.view_4d(ctx, tensor, Tk, H_kv, dv, B, item * cells * dv, item * cells, item * cells * dv * H_kv, 0)


def _tensor(ctx, x, ggml_type):
    """A new ggml tensor holding NumPy's contiguous x (ne: x's shape reversed)."""
    tensor = ggml.new_tensor_4d(ctx, ggml_type, *reversed(x.shape))
    ctypes.memmove(ggml.get_data(tensor), x.ctypes.data, x.nbytes)
    return tensor


def _compute(ctx, out, shape):
    """out's float32 data, as NumPy of shape, once its graph ran on one thread."""
    graph = ggml.new_graph(ctx)
    ggml.build_forward_expand(graph, out)
    status = ggml.graph_compute_with_ctx(ctx, graph, 1)
    if status != 0:
        raise RuntimeError(f"ggml_graph_compute_with_ctx returned status {status}")
    return np.ctypeslib.as_array(ctypes.cast(ggml.get_data(out), ctypes.POINTER(ctypes.c_float)), shape).copy()


def _flash(ctx, q, k, v, mask, scale, softcap, max_bias, sinks=None):
    """build_attn_mha's flash branch: an f32 cache cast to f16, ggml_flash_attn_ext, its sinks, F32 precision."""
    k, v = (ggml.cast(ctx, t, F16) if _type(t) == F32 else t for t in (k, v))
    cur = ggml.flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, softcap)
    if sinks is not None:
        ggml.flash_attn_ext_add_sinks(cur, sinks)
    ggml.prec_set_acc(cur, PREC_F32)
    return cur


def _softmax(ctx, q, k, v, mask, scale, softcap, max_bias, sinks=None):
    """build_attn_mha's branch without flash attention (v_trans: its permute undoes get_v's, no copy)."""
    v = ggml.permute(ctx, v, 0, 2, 1, 3)
    kq = ggml.mul_mat(ctx, k, q)
    ggml.prec_set_acc(kq, PREC_F32)
    if softcap:
        kq = ggml.scale(ctx, ggml.tanh(ctx, ggml.scale(ctx, kq, 1.0 / softcap)), softcap)
    kq = ggml.soft_max_ext(ctx, kq, mask, scale, max_bias)
    if sinks is not None:
        ggml.soft_max_add_sinks(kq, sinks)
    return ggml.cont(ctx, ggml.permute(ctx, ggml.mul_mat(ctx, v, kq), 0, 2, 1, 3))


def _type(tensor):
    """A tensor's enum ggml_type: struct ggml_tensor's first field."""
    return ctypes.c_int.from_address(tensor).value


CLAIMS = {"f32", "f16", "allow", "kv_lens", "window", "causal", "kv_cache", "gqa", "softcap"}  # and bias without flash attention


def takes_sinks(path):
    """Whether this ggml gives `path` its sinks: the function is exported and a 1-element problem with a
    sink runs through it."""
    if (ggml.flash_attn_ext_add_sinks if path == "flash" else ggml.soft_max_add_sinks) is None:
        return False
    one = np.zeros((1, 1, 1, 1))
    try:
        attention(one, one, one, one, 1.0, path=path, sinks=np.zeros(1, np.float32))
    except Exception:  # noqa: BLE001 (a refusal of any kind: not claimed)
        return False
    return True


def kq_mask(p):
    """The KQ mask llama.cpp would fill for problem p, [B,1,Tq,Tk] (or [B,H,Tq,Tk] with a bias):
    0 (or the bias) where a key is permitted, -inf where not."""
    allowed = p.mask()[:, :1]  # the same for every head
    values = np.zeros(allowed.shape) if p.bias is None else np.asarray(p.bias, np.float64)
    return np.where(allowed, values, -np.inf)


class Adapter:
    """forward(p): one ggml graph as llama.cpp builds its attention (`attention` above)."""

    def __init__(self, path="flash", cache="f16"):
        self.path, self.cache = path, cache
        self.capabilities = CLAIMS | ({"bias"} if path == "softmax" else set()) | \
            ({"sinks"} if takes_sinks(path) else set())
        self.restrictions = []

    def translate(self, p):
        """attention()'s arguments for problem p."""
        if p.dtype not in TYPES:
            raise ValueError(f"format {p.dtype} is not claimed")
        if p.backward or p.want_lse or p.dropout_p or (p.bias is not None and "bias" not in self.capabilities):
            raise ValueError("lse, dropout, backward or (with flash attention) a bias is not claimed")
        sinks = getattr(p, "sinks", None)
        if sinks is not None and "sinks" not in self.capabilities:
            raise ValueError("sinks are not claimed: this ggml cannot add them on this path")
        scale = 1.0 / math.sqrt(p.dk) if p.scale is None else p.scale
        return dict(q=p.q, k=p.k, v=p.v, mask=kq_mask(p), scale=scale, path=self.path, cache=self.cache,
                    softcap=p.softcap or 0.0, sinks=sinks)

    def __call__(self, p):
        return attention(**self.translate(p))


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve (forward, capabilities, restrictions), or
    None when an option printed what was asked (--show-capabilities)."""
    parser = argparse.ArgumentParser(prog="python3 -m attncheck.adapters.llama_cpp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", choices=["flash", "softmax"], default="flash",
                        help="ggml_flash_attn_ext (llama.cpp's -fa on, the default) or ggml_soft_max_ext (-fa off)")
    parser.add_argument("--cache-type", choices=["f16", "f32"], default="f16",
                        help="the KV cache's type (llama.cpp's -ctk/-ctv; f16 by default)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    args = parser.parse_args(argv)
    adapter = Adapter(args.path, args.cache_type)
    if args.show_capabilities:
        print(f"llama-cpp-python {llama_cpp.__version__}, --path {args.path} --cache-type {args.cache_type}: "
              f"{' '.join(sorted(adapter.capabilities))}")
        return None
    return dict(forward=adapter, capabilities=adapter.capabilities, restrictions=adapter.restrictions)


def main(argv=None):
    serve("llama_cpp", setup(argv))


if __name__ == "__main__":
    main()
