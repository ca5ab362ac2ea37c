"""A tiny decoder with an fp8 KV cache, profiled on CPU to make traceduck's sample traces.

`make_samples.py` runs this file (compiled under its bare name, so Python frames in the trace
read `tinydecoder.py(N): ...`). The buggy variant casts the whole preallocated fp8 cache to
bf16 in every layer on every step; the fixed variant casts only the used slice.
"""

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

CACHE_TOKENS = 16384
KV_DIM = 576  # compressed MLA-style KV: kv_lora_rank 512 + rope 64
HIDDEN = 64
LAYERS = 2
STEPS = 5  # schedule: wait 1, warmup 1, active 3


class Attention(nn.Module):
    def __init__(self, fixed: bool) -> None:
        super().__init__()
        self.fixed = fixed
        self.q = nn.Linear(HIDDEN, KV_DIM)
        self.out = nn.Linear(KV_DIM, HIDDEN)
        self.register_buffer("kv_cache", torch.zeros(CACHE_TOKENS, 1, KV_DIM, dtype=torch.float8_e4m3fn))

    def _write_cache(self, pos: int, kv: torch.Tensor) -> None:
        with record_function("kv_cache_write"):
            self.kv_cache[pos] = kv.to(torch.float8_e4m3fn)

    def _read_cache(self, used: int) -> torch.Tensor:
        with record_function("kv_cache_upcast"):
            if self.fixed:
                return self.kv_cache[:used].to(torch.bfloat16)
            return self.kv_cache.to(torch.bfloat16)[:used]  # the bug: upcasts every token slot

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        q = self.q(x)
        self._write_cache(pos, q.view(1, KV_DIM))
        kv = self._read_cache(pos + 1).float().squeeze(1)
        scores = torch.softmax(q @ kv.T / KV_DIM**0.5, dim=-1)
        return x + self.out(scores @ kv)


class Decoder(nn.Module):
    def __init__(self, fixed: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Attention(fixed) for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, 128)

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, pos)
        return self.head(x)


def decode(model: Decoder, prof, prompt_len: int) -> None:
    x = torch.randn(1, HIDDEN)
    for step in range(STEPS):
        with record_function("decode_step"):
            logits = model(x, prompt_len + step)
            with record_function("sample"):
                token = torch.argmax(logits, dim=-1)
            x = x + 0.01 * token.float().unsqueeze(-1)
        prof.step()


def make_trace(fixed: bool, out_path: str) -> None:
    torch.manual_seed(0)
    model = Decoder(fixed).eval()
    with torch.inference_mode(), profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
        with_stack=True,
        profile_memory=True,
        with_modules=True,
    ) as prof:
        decode(model, prof, prompt_len=100)
    prof.export_chrome_trace(out_path)
