"""Lightning-indexer scoring for DeepSeek-style sparse attention (DSA).

For one decode query the indexer gives every cached key s a score

    I[s] = sum_h w[h] * relu(q[h] . k[h, s])

and the layer attends only to the top-k keys by that score. The cached keys are bf16;
the scoring runs in fp32, so the keys are upcast first.
"""

import torch

TOPK = 512


def score(q: torch.Tensor, w: torch.Tensor, keys: torch.Tensor, k: int) -> torch.Tensor:
    """q: [H, 1, D] fp32, w: [H, 1] fp32, keys: [H, L, D] bf16 -> indices of the top-k keys."""
    keys = keys.to(torch.float32)          # aten::to -> _to_copy -> copy_
    logits = (q * keys).sum(dim=-1)        # aten::mul, aten::sum: [H, L]
    logits = logits.clamp_min(0.0)         # relu
    scores = (w * logits).sum(dim=0)       # aten::mul, aten::sum: [L]
    return scores.topk(min(k, scores.shape[0])).indices
