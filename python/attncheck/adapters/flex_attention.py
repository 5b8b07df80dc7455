"""PyTorch's FlexAttention on the CPU, as a child of `attncheck check --impl-cmd`.

The installed torch's own function, `torch.nn.attention.flex_attention.flex_attention(query, key,
value, score_mod=None, block_mask=None, scale=None, enable_gqa=False, ..., return_aux=None)` (torch
2.5 and later; an older torch is refused in one line), with the masks written as a `mask_mod`
turned into a BlockMask by the module's own `create_block_mask` and combined by its `and_masks`,
and the soft-cap and bias written as a `score_mod`, the way FlexAttention's docstrings and blog post
write them. Each problem becomes tensors and one call; the output (and log-sum-exp) is returned as
the library gives it: no masking, scaling, NaN handling or re-computation of its own. torch runs on
one thread (--threads).

  PYTHONPATH=python build/cli/attncheck check --jobs 1 \\
    --impl-cmd "$ATTNCHECK_TORCH_PYTHON -m attncheck.adapters.flex_attention"

How it runs on the CPU: called as it is (not under torch.compile), flex_attention warns once
("called without torch.compile() - this will use an unfused implementation that materializes the
full scores matrix") and runs its higher-order operator through dynamo with the "eager" backend,
whose CPU implementation is `torch._higher_order_ops.flex_attention.math_attention`: q and k cast
to float32 (float64 for float64), scores = q k^T times `scale`, score_mod applied to those scaled
scores, torch.where(mask_mod, score, -inf), torch._safe_softmax (a row of -inf alone gives weights
0), the weights cast back to the query's dtype and multiplied by v in that dtype; logsumexp of the
scores after score_mod, -inf for a row with no permitted key. The block structure of the BlockMask
is not used on that path (the mask_mod it carries is). torch.compile (inductor's C++ CPU template)
is not used: each new shape and closure is a compilation of seconds, where the eager path takes
about 0.1 s a call (torch 2.15.0 here).

How each feature of a problem reaches torch:

  q, k, v     query [B,H,Tq,dk], key [B,H_kv,Tk,dk], value [B,H_kv,Tk,dv] as they are (FlexAttention
              takes Ev != E).
  formats     torch.float32, float64, bfloat16 (a bf16 problem's values, float32 holding bf16
              values, converted exactly), float16. Claimed only where a tiny call in that format runs.
  allow       Translated: the mask_mod `allow[b, q_idx, kv_idx]` (True = may attend), the problem's
              mask as a bool tensor captured by the function, as FlexAttention's docs index a
              captured tensor (their document-masking example).
  kv_lens     Translated: the mask_mod `kv_idx < kv_lens[b]` (their padding example).
  causal      Translated: upper-left `q_idx >= kv_idx` (their causal example); lower-right
              `q_idx + (Tk - Tq) >= kv_idx`.
  window      Translated: `kv_idx >= q_idx + (Tk - Tq) - left` and `kv_idx <= q_idx + (Tk - Tq) +
              right` for the sides that are bounded (their sliding-window example, anchored where
              attncheck anchors it, at the lower-right diagonal).
              Every mask_mod of a problem is combined with flex_attention's `and_masks` and passed
              as create_block_mask(mask_mod, B or None, None, Tq, Tk, device="cpu") (B when the
              mask depends on the batch: allow, kv_lens).
  softcap     the score_mod `softcap * tanh(score / softcap)`: the score FlexAttention hands to
              score_mod is already multiplied by `scale` (math_attention above), as attncheck's
              soft-cap wants (softcap * tanh(scale q.k / softcap)). The soft-cap is captured as a
              0-dim float64 tensor (a score of float32 stays float32 with it: a 0-dim tensor does
              not promote, as a Python float would not): captured as a Python float, the way the
              blog post writes it, the second call with another value raises ("RuntimeError when
              making fake tensor call ... can only be of (Tensor, int, SymInt) but got
              (SymFloat,)"): dynamo makes the float dynamic on recompiling and the higher-order
              operator refuses it (examples/flex_attention/repro_softcap_float_second_value_raises.py).
  bias        the score_mod `score + bias[b, h, q_idx, kv_idx]`, after the soft-cap (attncheck's
              order), the bias a tensor in the query's dtype (-inf forbids).
  scale       the `scale` keyword, the problem's double; absent when the problem says default, so
              FlexAttention uses its own 1/sqrt(E).
  gqa         enable_gqa=True when H != H_kv (math_attention repeats KV heads with
              repeat_interleave: query head h reads KV head h // (H / H_kv), attncheck's rule).
  lse         return_aux=AuxRequest(lse=True) (return_lse=True on a torch without AuxRequest):
              the natural log-sum-exp [B,H,Tq], float32 (float64 for float64), as returned.
  paged KV    PyTorch's own paged attention for FlexAttention, `torch.nn.attention.experimental.
              _paged_attention.PagedAttention(n_pages, page_size, max_batch_size, device)` (source
              read in torch 2.15.0: _paged_attention.py lines 33-107, __init__ and reserve; 127-192,
              assign; 194-278, convert_logical_block_mask; 280-358, get_mask_mod and get_score_mod;
              and torch/_higher_order_ops/flex_attention.py lines 177-289, the eager path). A paged
              problem (p.BS > 0) is translated into its inputs, each as its source uses it:
    the pool  k [NB,H_kv,BS,dk] and v [NB,H_kv,BS,dv] as they are, poison included, become its caches
              [1,H_kv,NB*BS,d]: page n's slot s at n * BS + s, the address assign() writes (lines
              178-192). Nothing is cleaned, moved or gathered.
    the table PagedAttention(n_pages=NB, page_size=BS, max_batch_size=B); for each batch b with n_b
              keys (kv_lens[b], else Tk), reserve(b, n_b) with its empty_pages set to the table's
              first ceil(n_b / BS) entries of b, which reserve hands out from the end of that list
              in order (lines 85-107): its page_table[b], physical_to_logical[b] and capacity[b] are
              the table's, by its own code. Entries past them are not read (attncheck may repeat any
              page there). NotExpressible: a page named twice among a batch's pages
              (physical_to_logical holds one logical block per batch and page).
    masks     the dense problem's mask_mods (above) make the logical BlockMask,
              create_block_mask(mask_mod, B, None, Tq, L, BLOCK_SIZE=(128, BS)), per batch since
              each has its pages (noop_mask when the problem has no mask; query blocks of the
              default 128, KV blocks of the page size, since convert_logical_block_mask refuses any
              other: line 216), L = min(Tk, NB * BS): a
              page_table row has NB entries, and a key past NB * BS is past every sequence's length
              (a sequence's pages are distinct pages of the pool). Then
              convert_logical_block_mask(block_mask, kv_len=n), n the sequences' lengths (int64
              [B]), its kv_len "for upper bound check", as torch's own paged tests pass it: a
              BlockMask over the NB * BS physical keys whose mask_mod is get_mask_mod's (a physical
              key is permitted where its page is the batch's, its logical index is below n_b and
              the logical mask_mod permits that index: lines 296-313).
    score_mod get_score_mod(score_mod, kv_len=n) (lines 334-356): the problem's score_mod (or the
              identity) at the logical index, -inf at a physical key that is not the sequence's.
    captured  allow and bias are captured with their key dimension grown to ceil(Tk / BS) * BS, by
              True and 0 (they permit and add nothing): the eager path evaluates the mask_mod and
              score_mod at every physical key (math_attention's vmap, lines 203-215) and
              torch.where discards the value only after, so the mods are called at the logical
              indices of a sequence's whole last page (up to ceil(Tk / BS) * BS - 1) and at -BS ..
              -1 on pages not the sequence's (physical_to_logical -1; these wrap), and a captured
              tensor of Tk keys indexed past Tk raises ("IndexError: index 5 is out of bounds for
              dimension 2 with size 5": repro_paged_mask_mod_indexed_past_the_sequence.py).
    the call  flex_attention(q, k_cache, v_cache, score_mod, block_mask, scale, enable_gqa, lse) as
              for a dense problem: q's batch B against the caches' batch 1, which flex_attention
              takes with a BlockMask of batch B (flex_attention.py lines 2490-2503; math_attention
              expands the caches to B).
              Claimed where a call of one key in a pool of one page runs with every page size
              attncheck draws (1, 2, 16, 3, 5, 7; each probed, a size that does not run raises
              NotExpressible) and PagedAttention takes kv_len.
  not claimed backward (flex_attention refuses requires_grad on the CPU: "FlexAttention does not
              support backward on CPU"), dropout (no such argument).

A format or feature is claimed only when a 1-element call using it runs on this torch;
--show-capabilities prints the claims. Measured on torch 2.15.0 (PyPI's wheel, CPU): f32 f64 bf16
f16 allow kv_lens causal window softcap bias gqa lse paged_kv (pages of 1, 2, 16, 3, 5 and 7 each
run). No restriction is declared: each shape the checker sends was taken (dk != dv, any Tq, Tk).

FlexAttention's conventions, to check it under (test_flex_attention.py checks each):
  empty rows     0, and lse -inf (attncheck's defaults).
  masked inputs  torch.where replaces a forbidden score by -inf, but the weights (0 there) multiply
                 all of V, so NaN or inf in a forbidden value reaches the output (--masked-inputs
                 finite; examples/flex_attention/repro_forbidden_inputs_leak.py). In a paged call
                 that is all of the value cache: a NaN or inf in any slot of the pool no key fills
                 (a spare page, the rest of a sequence's last page) reaches every row
                 (repro_paged_unused_slot_nan_reaches_every_row.py; examples/flex_attention/test_paged.py).

What remains under them (200 cases of each format, seed 1, 2026-12-03): f64 passes; in f32, f16
and bf16 the lse of a row with a +inf permitted score is +inf, not NaN (torch.logsumexp; its out is
NaN: repro_lse_inf_score.py); in f32 a key forbidden by a -inf bias whose float32 score overflows
gives NaN, +inf + -inf (repro_bias_forbidden_score_overflow.py).

Paged calls (seed 1, 2026-12-04): the strict contract (120 s, 132 cases, every format) finds the
pool's NaN reaching the output (PagedEqualsDense, f16 and f32, accepted under --masked-inputs
finite: the convention above). Under --masked-inputs finite (420 s, 1,177 cases; PagedEqualsDense
50 runs, PoolBlocksMoveWithTheirTable 66, PoisonedSlotsNeverReachAnOutput 50) one finding: in bf16
the sign of an output that comes out zero follows the unused slots' finite poison, 0 x (+-1e30)
after the bf16 matmul flushed a subnormal answer (PoisonedSlotsNeverReachAnOutput, "broke a
relation", error/bound 0; repro_paged_bf16_zero_sign_follows_unused_slots.py). In f32 alone (seed 2,
300 s, 1,261 cases; 65, 66 and 65 runs of them) none.
"""
import argparse
import importlib
import warnings

import numpy as np

from . import NotExpressible, library, serve, version

torch = library("torch", "flex_attention", since="2.5")  # FlexAttention came in torch 2.5
flex = importlib.import_module("torch.nn.attention.flex_attention")

VERSION = version(torch.__version__)[:2]
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
AUX = getattr(flex, "AuxRequest", None)  # return_aux=AuxRequest(lse=True); older: return_lse=True
try:  # PyTorch's own paged attention for FlexAttention (experimental; "paged_kv" is claimed where a probe runs it)
    PagedAttention = importlib.import_module("torch.nn.attention.experimental._paged_attention").PagedAttention
except (ImportError, AttributeError):
    PagedAttention = None
PAGE_SIZES = (1, 2, 16, 3, 5, 7)  # the block sizes attncheck draws (cases.hpp's with_paging), each probed
Q_BLOCK = getattr(flex, "_DEFAULT_SPARSE_BLOCK_SIZE", 128)  # a paged BlockMask's query blocks: the default


def allow_mod(allow):
    return lambda b, h, q_idx, kv_idx: allow[b, q_idx, kv_idx]


def kv_lens_mod(kv_lens):
    return lambda b, h, q_idx, kv_idx: kv_idx < kv_lens[b]


def causal_mod(offset):
    """upper-left with offset 0, lower-right with Tk - Tq"""
    return lambda b, h, q_idx, kv_idx: q_idx + offset >= kv_idx


def window_left_mod(offset, left):
    return lambda b, h, q_idx, kv_idx: kv_idx >= q_idx + offset - left


def window_right_mod(offset, right):
    return lambda b, h, q_idx, kv_idx: kv_idx <= q_idx + offset + right


def padded(x, length, fill):
    """x with its last (key) dimension grown to `length` by `fill`: a paged call's captured allow and
    bias, indexable at every logical key index PagedAttention's mods are evaluated at (the module's
    docstring, "paged KV"); fill permits (True) or adds 0, so it masks nothing."""
    if x.shape[-1] >= length:
        return x
    tail = torch.full((*x.shape[:-1], length - x.shape[-1]), fill, dtype=x.dtype)
    return torch.cat([x, tail], dim=-1)


def score_mod_of(softcap, bias):
    """The score_mod: soft-cap, then bias; None when the problem has neither."""
    if softcap is None and bias is None:
        return None

    if softcap is not None:
        # a 0-dim float64 tensor, not a Python float: dynamo makes a captured float a SymFloat once
        # a second value is seen, which flex_attention refuses (the module's docstring, "softcap")
        softcap = torch.tensor(softcap, dtype=torch.float64)

    def score_mod(score, b, h, q_idx, kv_idx):
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if bias is not None:
            score = score + bias[b, h, q_idx, kv_idx]
        return score
    return score_mod


class Adapter:
    """forward(p): one flex_attention call per problem."""

    def __init__(self):
        self.page_sizes = ()  # the page sizes a paged call runs with (_probe)
        self.capabilities = self._probe()
        self.restrictions = []

    def _probe(self):
        """The features a 1-element call with each accepts on this torch."""
        claims = set()
        one = dict(B=1, H=1, H_kv=1, Tq=1, Tk=1, dk=1, dv=1)

        def runs(**features):
            try:
                self.call(**{**one, "dtype": "f32", **features})
                return True
            except (RuntimeError, TypeError, ValueError, NotImplementedError, AssertionError, IndexError):
                return False

        for name in DTYPES:
            if runs(dtype=name):
                claims.add(name)
        if runs(allow=np.ones((1, 1, 1), bool)):
            claims.add("allow")
        if runs(kv_lens=np.ones(1, np.int32)):
            claims.add("kv_lens")
        if runs(causal="upper-left") and runs(causal="lower-right"):
            claims.add("causal")
        if runs(window=(0, 0)):
            claims.add("window")
        if runs(softcap=1.0):
            claims.add("softcap")
        if runs(bias=np.zeros((1, 1, 1, 1), np.float32)):
            claims.add("bias")
        if runs(H=2):
            claims.add("gqa")
        if runs(want_lse=True):
            claims.add("lse")
        if PagedAttention is not None:
            # one key in a pool of one page, of each size attncheck draws
            one_page = np.zeros((1, 1), np.int32)
            self.page_sizes = tuple(BS for BS in PAGE_SIZES if runs(NB=1, BS=BS, block_table=one_page))
            if self.page_sizes:
                claims.add("paged_kv")
        return claims

    def block_mask(self, B, Tq, Tk, allow=None, kv_lens=None, causal="none", window=None, paged=None):
        """create_block_mask of the problem's mask_mods combined with and_masks; None without any. paged:
        (the page size, the logical length, the length allow is captured at) for a paged call's logical
        block mask: per batch, its KV blocks the page size, noop_mask when the problem has no mask."""
        mods = []
        if allow is not None:
            allow = torch.from_numpy(np.array(allow, bool))
            mods.append(allow_mod(allow if paged is None else padded(allow, paged[2], True)))
        if kv_lens is not None:
            mods.append(kv_lens_mod(torch.from_numpy(np.array(kv_lens, np.int32))))
        if causal != "none":
            mods.append(causal_mod(0 if causal == "upper-left" else Tk - Tq))
        if window is not None:
            left, right = window
            if left >= 0:
                mods.append(window_left_mod(Tk - Tq, left))
            if right >= 0:
                mods.append(window_right_mod(Tk - Tq, right))
        if paged is not None:
            page_size, logical, _ = paged
            mask_mod = flex.noop_mask if not mods else mods[0] if len(mods) == 1 else flex.and_masks(*mods)
            return flex.create_block_mask(mask_mod, B, None, Tq, logical, device="cpu", BLOCK_SIZE=(Q_BLOCK, page_size))
        if not mods:
            return None
        mask_mod = mods[0] if len(mods) == 1 else flex.and_masks(*mods)
        per_batch = allow is not None or kv_lens is not None
        return flex.create_block_mask(mask_mod, B if per_batch else None, None, Tq, Tk, device="cpu")

    def paged_call(self, B, Tk, BS, NB, block_table, kv_lens):
        """(a PagedAttention holding the problem's table, the sequences' lengths as its kv_len [B] int64,
        the logical length of the block mask) for a paged call, or NotExpressible saying why the
        library cannot hold the table."""
        table = np.asarray(block_table, np.int64).reshape(B, -1)
        lengths = np.full(B, Tk, np.int64) if kv_lens is None else np.asarray(kv_lens, np.int64)
        paged = PagedAttention(n_pages=NB, page_size=BS, max_batch_size=B, device="cpu")
        for b in range(B):
            pages = table[b, :-(-int(lengths[b]) // BS)].tolist()  # the pages holding batch b's keys, in order
            if len(set(pages)) != len(pages):
                twice = sorted({n for n in pages if pages.count(n) > 1})
                raise NotExpressible(f"batch {b}'s table names page(s) {twice} twice among the {len(pages)} its "
                                     f"{lengths[b]} keys fill: PagedAttention maps a page to one logical block of a "
                                     f"sequence (physical_to_logical [batch, page])")
            # reserve() takes the pages a sequence needs from the end of empty_pages, in that order
            paged.empty_pages = list(pages)
            paged.reserve(torch.tensor(b), torch.tensor(int(lengths[b])))
            given = paged.page_table[b, :len(pages)].tolist()
            if given != pages:
                raise RuntimeError(f"PagedAttention.reserve gave batch {b} pages {given}, not the table's {pages}")
        # the logical block mask's keys: Tk, but no more than the NB pages a page_table row has; keys past
        # NB * BS are past every sequence's length (a sequence's pages are distinct pages of the pool)
        return paged, torch.from_numpy(lengths), min(Tk, NB * BS)

    def call(self, dtype, B, H, H_kv, Tq, Tk, dk, dv, q=None, k=None, v=None, allow=None, kv_lens=None,
             causal="none", window=None, softcap=None, bias=None, scale=None, want_lse=False, NB=0, BS=0,
             block_table=None):
        """(out, lse or None) from flex_attention, for tensors given as NumPy (zeros when None). BS > 0: a
        paged call, k [NB,H_kv,BS,dk] and v [NB,H_kv,BS,dv] the pools, block_table [B,BPS]."""
        t = DTYPES[dtype]
        tensor = lambda x, shape: (torch.zeros(shape, dtype=t) if x is None
                                   else torch.from_numpy(np.array(x)).to(t))
        kv = (NB, H_kv, BS) if BS else (B, H_kv, Tk)
        q, k, v = tensor(q, (B, H, Tq, dk)), tensor(k, (*kv, dk)), tensor(v, (*kv, dv))
        bias = None if bias is None else tensor(bias, (B, H, Tq, Tk))
        kwargs = {}
        if scale is not None:
            kwargs["scale"] = scale
        if H != H_kv:
            kwargs["enable_gqa"] = True
        if want_lse:
            kwargs.update(return_aux=AUX(lse=True)) if AUX is not None else kwargs.update(return_lse=True)
        if BS:
            paged, kv_len, logical = self.paged_call(B, Tk, BS, NB, block_table, kv_lens)
            reach = max(1, -(-Tk // BS)) * BS  # every logical key index a page of a sequence holds, and -BS .. -1
            block_mask = self.block_mask(B, Tq, Tk, allow, kv_lens, causal, window, paged=(BS, logical, reach))
            bias = None if bias is None else padded(bias, reach, 0.0)
            block_mask = paged.convert_logical_block_mask(block_mask, kv_len=kv_len)
            score_mod = paged.get_score_mod(score_mod_of(softcap, bias), kv_len=kv_len)
            # the pool [NB,H_kv,BS,d] as PagedAttention's cache [1,H_kv,NB*BS,d]: page n's slot s at n * BS + s
            k, v = (x.permute(1, 0, 2, 3).reshape(1, H_kv, NB * BS, x.shape[-1]) for x in (k, v))
        else:
            block_mask = self.block_mask(B, Tq, Tk, allow, kv_lens, causal, window)
            score_mod = score_mod_of(softcap, bias)
        with torch.no_grad():
            result = flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, **kwargs)
        if not want_lse:
            return result, None
        out, aux = result
        return out, (aux.lse if AUX is not None else aux)

    def translate(self, p):
        """The call's arguments for problem p (the keywords of `call`)."""
        if p.dtype not in self.capabilities:
            raise ValueError(f"format {p.dtype} is not claimed")
        if p.backward or p.dropout_p:
            raise ValueError("backward and dropout are not claimed")
        paged = getattr(p, "BS", 0) > 0
        if paged and "paged_kv" not in self.capabilities:
            raise ValueError("paged KV is not claimed")
        if paged and p.BS not in self.page_sizes:
            raise NotExpressible(f"a page size of {p.BS}: this torch's PagedAttention ran with pages of "
                                 f"{', '.join(map(str, self.page_sizes))} alone (the adapter's probe)")
        return dict(dtype=p.dtype, B=p.B, H=p.H, H_kv=p.H_kv, Tq=p.Tq, Tk=p.Tk, dk=p.dk, dv=p.dv, q=p.q, k=p.k,
                    v=p.v, allow=p.allow, kv_lens=p.kv_lens, causal=p.causal, window=p.window, softcap=p.softcap,
                    bias=p.bias, scale=p.scale, want_lse=p.want_lse,
                    **(dict(NB=p.NB, BS=p.BS, block_table=p.block_table) if paged else {}))

    def __call__(self, p):
        out, lse = self.call(**self.translate(p))
        if out.dtype != DTYPES[p.dtype]:
            raise TypeError(f"torch returned {out.dtype} for a {p.dtype} problem")
        out = (out.to(torch.float32) if p.dtype == "bf16" else out).numpy()  # bf16 values, exactly, in float32
        return (out, lse.numpy()) if p.want_lse else out


def setup(argv=None):
    """The options parsed: the keywords of attncheck.serve, or None when an option printed what was
    asked (--show-capabilities)."""
    parser = argparse.ArgumentParser(prog="python3 -m attncheck.adapters.flex_attention", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--show-capabilities", action="store_true", help="print what is claimed and exit")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    # the one warning of the eager path ("called without torch.compile()"), said in the docstring
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    adapter = Adapter()
    if args.show_capabilities:
        print(f"torch {torch.__version__}: {' '.join(sorted(adapter.capabilities))}")
        return None
    return dict(forward=adapter, capabilities=adapter.capabilities, restrictions=adapter.restrictions)


def main(argv=None):
    serve("flex_attention", setup(argv))


if __name__ == "__main__":
    main()
