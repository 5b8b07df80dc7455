/* PyTorch 1.13's own CPU attention behind plugin ABI v1: a real third-party kernel for attncheck.
 *
 * It calls at::_scaled_dot_product_attention exactly as Debian 12's libtorch-dev 1.13.1 declares it
 * (ATen/ops/_scaled_dot_product_attention.h):
 *   std::tuple<at::Tensor, at::Tensor> at::_scaled_dot_product_attention(
 *       const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
 *       const c10::optional<at::Tensor>& attn_mask = {}, double dropout_p = 0.0,
 *       bool need_attn_weights = false, bool is_causal = false);
 * On CPU it runs _scaled_dot_product_attention_math: query * (1/sqrt(dk)), matmul with key^T, a bool
 * attn_mask turned additive (0 where true, -inf where false: true = may attend, the ABI's polarity),
 * softmax over keys, matmul with value. is_causal = upper-left (tril, diagonal 0), and it refuses an
 * attn_mask together with is_causal. There is no scale argument and no lower-right causal mode.
 *
 * PyTorch's numerics are checked as they are: nothing below repairs them. Its bugs against the
 * attncheck contract (docs/contract.md), observed on 1.13.1 with hand-made float inputs, shapes
 * [B,H,T,d] = [1,1,*,*], q = [1, 0], k = [[10, 0], [0, 0]], v = [[1], [2]], mask = [[false, true]]
 * (only key 1 permitted; the correct output is 2 in every case):
 *  - a row with no permitted key (mask [[false, false]]) gives NaN, not 0: softmax of all -inf;
 *  - NaN or inf in a masked-out value (v = [[NaN], [2]] or [[inf], [2]]) leaks: weight 0 * NaN or
 *    0 * inf in the matmul with value gives NaN;
 *  - a NaN in a masked-out key (k = [[NaN, 0], [0, 0]]) gives score NaN + -inf = NaN: NaN row;
 *  - a masked-out key whose score overflows (q = [3e38, 0], k = [[3e38, 0], [0, 0]]) gives
 *    +inf + -inf = NaN: NaN row.
 */
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "attncheck/plugin.h"

namespace {

template <class T>
int32_t forward(const attncheck_problem* p) {
  // q [B,H,Tq,dk], k [B,H,Tk,dk], v [B,H,Tk,dv], allow [B,Tq,Tk] (or NULL); out [B,H,Tq,dv].
  try {
    if (!p || !p->q || !p->k || !p->v || !p->out) return 1;
    if (p->batch < 1 || p->heads < 1 || p->q_len < 1 || p->kv_len < 1 || p->d_k < 1 || p->d_v < 1) return 1;
    if (p->causal < 0 || p->causal > 2 || !std::isfinite(p->scale)) return 1;

    // Results must not depend on the number of threads: one, set once per process.
    static std::once_flag threads;
    std::call_once(threads, [] { at::set_num_threads(1); });

    const int64_t B = p->batch, H = p->heads, Tq = p->q_len, Tk = p->kv_len, dk = p->d_k, dv = p->d_v;
    const auto options = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
    // The inputs are read-only: PyTorch only reads them (every op below makes a new tensor).
    at::Tensor q = at::from_blob(const_cast<void*>(p->q), {B, H, Tq, dk}, options);
    const at::Tensor k = at::from_blob(const_cast<void*>(p->k), {B, H, Tk, dk}, options);
    const at::Tensor v = at::from_blob(const_cast<void*>(p->v), {B, H, Tk, dv}, options);

    // PyTorch 1.13 always scales by 1/sqrt(dk) (query * (1.0 / sqrt(dk)), the constant rounded to
    // T). A non-default scale is folded into a scaled copy of q so that PyTorch's own multiplication
    // then gives q * scale: q' = q * (scale / T(1/sqrt(dk))). That is one rounding of q that
    // PyTorch itself would not do; a correct kernel's error bound covers a rounding of the scaled q.
    if (p->scale != 0) {
      const double pytorch_scale = double(T(1.0 / std::sqrt(double(dk))));
      const double factor = p->scale / pytorch_scale;
      if (factor != 1.0) q = (q.to(at::kDouble) * factor).to(options.dtype());
    }

    // Masks. allow [B,Tq,Tk] -> a bool attn_mask [B,1,Tq,Tk] broadcast over heads (true = may
    // attend). Causal upper-left alone is PyTorch's is_causal; with an allow mask (PyTorch refuses
    // both at once), or lower-right (which PyTorch 1.13 lacks), it goes into the bool mask, by AND.
    c10::optional<at::Tensor> mask;
    bool is_causal = false;
    if (p->causal == 1 && !p->allow) {
      is_causal = true;
    } else if (p->allow || p->causal != 0) {
      at::Tensor m = at::empty({B, 1, Tq, Tk}, at::TensorOptions().dtype(at::kBool));
      bool* permitted = m.data_ptr<bool>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < Tq; ++i)
          for (int64_t j = 0; j < Tk; ++j) {
            const int64_t n = (b * Tq + i) * Tk + j;
            bool ok = !p->allow || p->allow[n] != 0;
            if (p->causal == 1) ok = ok && j <= i;
            if (p->causal == 2) ok = ok && j <= i + Tk - Tq;
            permitted[n] = ok;
          }
      mask = m;
    }

    const at::Tensor out = std::get<0>(at::_scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0,
                                                                         /*need_attn_weights=*/false, is_causal))
                               .to(options.dtype())
                               .contiguous();
    if (out.sizes() != at::IntArrayRef({B, H, Tq, dv})) return 2;
    std::memcpy(p->out, out.data_ptr<T>(), size_t(B * H * Tq * dv) * sizeof(T));
    return 0;
  } catch (...) {  // c10::Error and everything else: refuse, never throw across the C ABI
    return 3;
  }
}

}  // namespace

extern "C" {

int32_t attncheck_abi_version(void) { return 1; }
int32_t attncheck_forward_f32(const attncheck_problem* p) { return forward<float>(p); }
int32_t attncheck_forward_f64(const attncheck_problem* p) { return forward<double>(p); }

}  // extern "C"
