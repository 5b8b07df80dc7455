"""torch 2.15's PagedAttention for FlexAttention (torch.nn.attention.experimental._paged_attention)
calls the user's logical mask_mod and score_mod at logical key indices no sequence has: get_mask_mod
and get_score_mod map every physical key of the cache to `physical_to_logical[b, page] * page_size +
offset` and call the mod there, discarding its value afterwards by torch.where (is_valid: the page is
the sequence's, the index below kv_len). On the eager path (math_attention vmaps the mods over every
physical key) that is the index of each slot of a sequence's last page, up to its end, past the
sequence's length, and -page_size .. -1 on every page that is not the sequence's. A mod that indexes a
captured tensor of the sequence's length, FlexAttention's own idiom (its document-masking example,
an allow mask, a bias), raises when the last page is not full, though the keys it would read are
forbidden anyway; the negative indices wrap silently. The adapter
(python/attncheck/adapters/flex_attention.py, "captured") captures allow and bias grown to whole
pages (True, 0) for this.

The case: one sequence of 3 keys in pages of 2 (n_pages 3), mask_mod `allow[b, q_idx, kv_idx]` with
allow [1, 1, 3] all True: flex_attention raises (an index of 3 for 3 keys); with allow grown to 4
keys it runs and gives the mean of the 3 values, 2.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), float32.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_paged_mask_mod_indexed_past_the_sequence.py
Exit 0 when it reproduces, 1 otherwise.
"""
import sys
import warnings

import torch

print(f"torch {torch.__version__}")
try:
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:
    print("no torch.nn.attention.experimental._paged_attention: not reproduced")
    sys.exit(1)
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.set_num_threads(1)


def paged_call(allow):
    """flex_attention through PagedAttention of one sequence of 3 keys, the mask_mod reading `allow`."""
    paged = PagedAttention(n_pages=3, page_size=2, max_batch_size=1, device="cpu")
    paged.reserve(torch.tensor(0), torch.tensor(3))
    k_cache, v_cache = torch.zeros(1, 1, 6, 1), torch.zeros(1, 1, 6, 1)
    values = torch.tensor([1.0, 2.0, 3.0]).reshape(1, 1, 3, 1)
    paged.assign(torch.tensor([0]), torch.arange(3).reshape(1, 3), torch.zeros(1, 1, 3, 1), values, k_cache, v_cache)
    kv_len = torch.tensor([3])
    logical = create_block_mask(lambda b, h, q_idx, kv_idx: allow[b, q_idx, kv_idx], 1, None, 1, 3, device="cpu",
                                BLOCK_SIZE=2)
    block_mask = paged.convert_logical_block_mask(logical, kv_len=kv_len)
    return flex_attention(torch.zeros(1, 1, 1, 1), k_cache, v_cache, score_mod=paged.get_score_mod(None, kv_len=kv_len),
                          block_mask=block_mask).item()


try:
    out = paged_call(torch.ones(1, 1, 3, dtype=torch.bool))
    raised = None
    print(f"allow of the sequence's 3 keys: {out} (runs)")
except Exception as e:  # noqa: BLE001 - what torch raises is what this shows
    raised = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    print(f"allow of the sequence's 3 keys: raised {raised}")
grown = paged_call(torch.ones(1, 1, 4, dtype=torch.bool))
print(f"allow grown to the page's 4 keys: {grown} (the contract: 2)")
if raised is not None and abs(grown - 2) < 1e-6:
    print("reproduced: PagedAttention calls the logical mask_mod past the sequence's keys, and indexing a captured "
          "tensor of its length raises")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
