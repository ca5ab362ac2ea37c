"""KV-cache read for the growing-cast seed trace (see growing.py)."""

import torch


def read(cache: torch.Tensor, n: int) -> torch.Tensor:
    """The n valid rows of a bf16 cache [MAX_LEN, HEADS, HEAD_DIM], upcast to fp32."""
    return cache[:n].to(torch.float32)
