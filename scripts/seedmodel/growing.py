"""A decode loop whose KV read casts a growing bf16 slice to fp32, profiled on CPU.

`make_seed_traces.py` runs this file and `kvcache.py` compiled under their bare names, so the
Python frames read `growing.py(N): forward` and `kvcache.py(N): read`. Each step appends one
row to the bf16 cache [MAX_LEN, HEADS, HEAD_DIM] and reads back the n valid rows as fp32, so
the cast's shape is [n, HEADS, HEAD_DIM] with n one larger every step.
"""

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from kvcache import read

MAX_LEN = 8192
HEADS = 8
HEAD_DIM = 128
HIDDEN = HEADS * HEAD_DIM
LAYERS = 2
PROMPT_LEN = 2045  # step s reads n = 2046 + s rows: ProfilerStep#2..#4 read 2048, 2049, 2050
STEPS = 5  # schedule: wait 1, warmup 1, active 3


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wq = nn.Linear(HIDDEN, HIDDEN)
        self.wk = nn.Linear(HIDDEN, HIDDEN)
        self.wo = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("cache", torch.zeros(MAX_LEN, HEADS, HEAD_DIM, dtype=torch.bfloat16))

    def prefill(self, n: int) -> None:
        self.cache[:n] = torch.randn(n, HEADS, HEAD_DIM).to(torch.bfloat16)

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        with record_function("kv_cache_write"):
            self.cache[pos] = self.wk(x).view(HEADS, HEAD_DIM).to(torch.bfloat16)
        k = read(self.cache, pos + 1)  # [n, HEADS, HEAD_DIM] fp32
        q = self.wq(x).view(1, HEADS, HEAD_DIM)
        probs = torch.softmax((q * k).sum(dim=-1) / HEAD_DIM**0.5, dim=0)  # [n, HEADS]
        out = (probs.unsqueeze(-1) * k).sum(dim=0)  # [HEADS, HEAD_DIM]
        return x + self.wo(out.view(1, HIDDEN))


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Attention() for _ in range(LAYERS))

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, pos)
        return x


def decode(model: Decoder, prof, prompt_len: int) -> None:
    x = torch.randn(1, HIDDEN)
    for step in range(STEPS):
        with record_function("decode_step"):
            x = torch.tanh(model(x, prompt_len + step))
        prof.step()


def make_trace(out_path: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one intra-op thread: no thread-pool wake-up noise on small ops
    model = Decoder().eval()
    with torch.inference_mode():
        for layer in model.layers:
            layer.prefill(PROMPT_LEN)
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
