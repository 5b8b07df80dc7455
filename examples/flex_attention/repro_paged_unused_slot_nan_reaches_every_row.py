"""torch 2.15's PagedAttention for FlexAttention (torch.nn.attention.experimental._paged_attention),
eager on the CPU, lets a NaN or inf in a slot of the KV cache that no sequence holds reach every
output row: get_mask_mod and get_score_mod forbid each physical key that is not the sequence's (a page
not in its page table, a slot past its kv_len), so its weight is 0, but the eager path
(torch._higher_order_ops.flex_attention.math_attention) multiplies the weights by all of the value
cache, n_pages * page_size slots, and 0 x NaN = NaN (0 x inf too). It is FlexAttention's convention
for a forbidden value (repro_forbidden_inputs_leak.py), reached here through slots that are not keys
of the problem at all: a spare page of the pool, the rest of a sequence's last page. attncheck's
contract: a paged pool's slots that hold no key never reach an output
(Property.PoisonedSlotsNeverReachAnOutput, PagedEqualsDense); under --masked-inputs finite, whose
poisons are finite, it holds.

The case: B 1, H 1, page_size 2, n_pages 3, one sequence of 3 keys on pages 2 and 0 (reserve()),
q = 0, k = 0, values 1, 2, 3 written by assign(); the cache's other slots (page 0's second slot,
page 1) hold NaN, then inf, then 0. The logical block mask: create_block_mask(noop_mask, 1, None, 1,
4, BLOCK_SIZE=2), converted by convert_logical_block_mask(kv_len=[3]); score_mod
get_score_mod(None, kv_len=[3]). Expected: the mean of the 3 values, 2, whatever the other slots hold.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), float32 and float64.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_paged_unused_slot_nan_reaches_every_row.py
Exit 0 when it reproduces, 1 otherwise.
"""
import math
import sys
import warnings

import torch

print(f"torch {torch.__version__}")
try:
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention, noop_mask
except ImportError:
    print("no torch.nn.attention.experimental._paged_attention: not reproduced")
    sys.exit(1)
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.set_num_threads(1)


def paged_call(dtype, other):
    """flex_attention through PagedAttention, the cache's slots no key fills holding `other`."""
    paged = PagedAttention(n_pages=3, page_size=2, max_batch_size=1, device="cpu")
    paged.empty_pages = [2, 0]  # reserve takes them from the end: logical page 0 is page 2, page 1 is page 0
    paged.reserve(torch.tensor(0), torch.tensor(3))
    k_cache = torch.full((1, 1, 6, 1), other, dtype=dtype)
    v_cache = torch.full((1, 1, 6, 1), other, dtype=dtype)
    keys = torch.zeros(1, 1, 3, 1, dtype=dtype)
    values = torch.tensor([1.0, 2.0, 3.0], dtype=dtype).reshape(1, 1, 3, 1)
    paged.assign(torch.tensor([0]), torch.arange(3).reshape(1, 3), keys, values, k_cache, v_cache)
    kv_len = torch.tensor([3])
    logical = create_block_mask(noop_mask, 1, None, 1, 4, device="cpu", BLOCK_SIZE=2)
    block_mask = paged.convert_logical_block_mask(logical, kv_len=kv_len)
    score_mod = paged.get_score_mod(None, kv_len=kv_len)
    q = torch.zeros(1, 1, 1, 1, dtype=dtype)
    return flex_attention(q, k_cache, v_cache, score_mod=score_mod, block_mask=block_mask).item()


reproduced = True
for dtype in (torch.float32, torch.float64):
    nan, inf, zero = (paged_call(dtype, x) for x in (math.nan, math.inf, 0.0))
    print(f"{dtype}: other slots NaN: {nan}, inf: {inf}, 0: {zero} (the contract: 2 each)")
    reproduced &= math.isnan(nan) and math.isnan(inf) and abs(zero - 2) < 1e-6
if reproduced:
    print("reproduced: a NaN or inf in a cache slot no sequence holds reaches the output")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
