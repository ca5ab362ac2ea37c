"""A small decoder with DeepSeek-style sparse attention, profiled on CPU for seed 003.

`make_seed_traces.py` runs this file and `attn/indexer.py` compiled under their relative
names, so the Python frames in the trace read `model.py(N): forward` and
`attn/indexer.py(N): score`.

Every layer keeps a preallocated bf16 key cache for its indexer, [INDEX_HEADS, MAX_LEN,
INDEX_DIM], of which only the first n_valid rows (the prompt plus the decoded tokens) hold
keys. On every decode step the indexer scores the cached keys and the layer attends only to
the TOPK best ones. The buggy variant hands the indexer the WHOLE cache, so the fp32 upcast,
the mul/sum/clamp_min/mul/sum glue and the topk run over MAX_LEN rows; the fixed variant
hands it only the n_valid rows, so its shapes grow by one row per step.
"""

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.indexer import TOPK, score

MAX_LEN = 131072  # preallocated context
INDEX_HEADS = 8
INDEX_DIM = 64
KV_DIM = 64
HIDDEN = 256
VOCAB = 1024
LAYERS = 2
PROMPT_LEN = 1002  # decode step s writes row PROMPT_LEN + s, so n_valid = 1003 + s
STEPS = 5  # schedule: wait 1, warmup 1, active 3 -> ProfilerStep#2..#4 (n_valid 1005..1007)


class SparseAttention(nn.Module):
    def __init__(self, fixed: bool) -> None:
        super().__init__()
        self.fixed = fixed
        self.wq = nn.Linear(HIDDEN, KV_DIM)
        self.wkv = nn.Linear(HIDDEN, KV_DIM)
        self.wo = nn.Linear(KV_DIM, HIDDEN)
        self.index_q = nn.Linear(HIDDEN, INDEX_HEADS * INDEX_DIM)
        self.index_k = nn.Linear(HIDDEN, INDEX_HEADS * INDEX_DIM)
        self.index_w = nn.Linear(HIDDEN, INDEX_HEADS)
        self.register_buffer("kv_cache", torch.zeros(MAX_LEN, KV_DIM))
        self.register_buffer("index_keys", torch.zeros(INDEX_HEADS, MAX_LEN, INDEX_DIM, dtype=torch.bfloat16))

    def prefill(self, n: int) -> None:
        self.kv_cache[:n] = torch.randn(n, KV_DIM)
        self.index_keys[:, :n] = torch.randn(INDEX_HEADS, n, INDEX_DIM).to(torch.bfloat16)

    def _write_cache(self, pos: int, x: torch.Tensor) -> None:
        with record_function("kv_cache_write"):
            self.kv_cache[pos] = self.wkv(x)[0]
            self.index_keys[:, pos] = self.index_k(x).view(INDEX_HEADS, INDEX_DIM).to(torch.bfloat16)

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        n_valid = pos + 1
        self._write_cache(pos, x)
        with record_function("indexer"):
            q_index = self.index_q(x).view(INDEX_HEADS, 1, INDEX_DIM)
            weights = torch.softmax(self.index_w(x), dim=-1).view(INDEX_HEADS, 1)
            if self.fixed:
                keys = self.index_keys[:, :n_valid]
            else:
                keys = self.index_keys  # the bug: every preallocated row, valid or not
            top = score(q_index, weights, keys, TOPK)
        with record_function("sparse_attention"):
            kv = self.kv_cache.index_select(0, top)
            q = self.wq(x)
            probs = torch.softmax(q @ kv.T / KV_DIM**0.5, dim=-1)
            return x + self.wo(probs @ kv)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, fixed: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.attn = SparseAttention(fixed)
        self.norm2 = nn.LayerNorm(HIDDEN)
        self.mlp = MLP()

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        x = self.attn(self.norm1(x), pos)
        return self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, fixed: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block(fixed) for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, token: torch.Tensor, pos: int) -> torch.Tensor:
        x = self.embed(token)
        for layer in self.layers:
            x = layer(x, pos)
        return self.head(x)


def decode(model: Decoder, prof, prompt_len: int) -> None:
    token = torch.tensor([1])
    for step in range(STEPS):
        with record_function("decode_step"):
            logits = model(token, prompt_len + step)
            with record_function("sample"):
                token = torch.argmax(logits, dim=-1)
        prof.step()


def make_trace(fixed: bool, out_path: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one intra-op thread: no thread-pool wake-up noise on small ops
    model = Decoder(fixed).eval()
    with torch.inference_mode():
        for layer in model.layers:
            layer.attn.prefill(PROMPT_LEN)
    with torch.inference_mode(), profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
        with_stack=True,
        profile_memory=True,
        with_modules=True,
    ) as prof:
        decode(model, prof, prompt_len=PROMPT_LEN)
    prof.export_chrome_trace(out_path)
