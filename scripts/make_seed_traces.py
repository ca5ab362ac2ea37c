"""Make the seed traces of story 003 (a sparse-attention indexer that scores the whole KV cache).

Writes, under tests/data/seeds/:

  indexer_buggy.json.gz   indexer_fixed.json.gz   growing_cast.json.gz

Regenerate: `pip install torch==2.13.0` (the CPU build is enough), then
`python scripts/make_seed_traces.py`. The traces are committed, so nothing else needs torch.

How they are made (the approach of make_samples.py): the model files under scripts/seedmodel/
are exec'd compiled under their relative names (`model.py`, `attn/indexer.py`, `growing.py`,
`kvcache.py`), so the Python frames read e.g. `attn/indexer.py(16): score`. Each trace is a
torch.profiler CPU profile with schedule(wait=1, warmup=1, active=3), record_shapes,
with_stack, profile_memory and with_modules, prof.step() once per decode step over 5 steps, so
ProfilerStep#2, #3 and #4 are the three active steps (and the only ProfilerStep events). torch
is seeded (manual_seed(0)) and runs one intra-op thread. The host name becomes `sample-host`,
absolute paths are cut to relative ones, and gzip is written with mtime=0. Shapes, dtypes,
frames and event structure are the same on every run; durations, pids/tids and the object
addresses in built-in frame names are not.

Frame line numbers: a frame entered while profiling shows its function's `def` line
(`model.py(54): forward`); the frames already open when profiling began show their current
line (`model.py(116): decode`, `model.py(134): make_trace`).

indexer_buggy.json.gz -- scripts/seedmodel/model.py with fixed=False. A 2-layer decoder
(Embedding, then per layer LayerNorm, SparseAttention, LayerNorm, MLP of two Linears + gelu,
then a Linear head over 1024 tokens; hidden 256). Each layer's indexer key cache is a
preallocated bf16 [8, 131072, 64] (heads x MAX_LEN x dim) of which only the prompt (1002 rows)
plus the decoded rows are valid; decode step s writes row 1002 + s, so n_valid is 1005, 1006,
1007 in ProfilerStep#2..#4. The bug: SparseAttention.forward passes the WHOLE cache to the
indexer, whose glue ops then run over all 131072 rows, in every layer on every step (2 calls
per active step, 6 per op over the 3 active steps):
  aten::to / aten::_to_copy / aten::copy_  [8, 131072, 64] bf16 -> fp32   (indexer.py line 18)
  aten::mul    [8, 1, 64] x [8, 131072, 64] fp32                         (line 19)
  aten::sum    [8, 131072, 64] fp32, dim -1                              (line 19)
  aten::clamp_min  [8, 131072] fp32                                      (line 20)
  aten::mul    [8, 1] x [8, 131072] fp32, then aten::sum [8, 131072]     (line 21)
  aten::topk   [131072] fp32, k=512                                      (line 22)
  Call site (innermost model frame of every one of them): `attn/indexer.py(16): score`;
  its caller: `model.py(54): forward` (SparseAttention.forward, the call is on line 64),
  called from `model.py(90): forward` (Block), `model.py(102): forward` (Decoder),
  `model.py(116): decode`. Under record_function("indexer"); the ordinary part (Linears,
  softmax, index_select of the 512 picked KV rows, gelu MLP, argmax under "sample") sits in
  `model.py(54): forward`, `model.py(49): _write_cache`, `model.py(78): forward` and
  `model.py(102): forward`. The glue ops take tens to hundreds of ms each and well over 90%
  of the active steps' CPU self time (each step ~1.3 s on a 2-core CPU).

indexer_fixed.json.gz -- the same model with fixed=True: the indexer gets only the valid rows,
self.index_keys[:, :n_valid], so the same ops and frames carry shapes that grow by one row
per step: [8, 1005, 64], [8, 1006, 64], [8, 1007, 64] for the cast and the first mul/sum,
[8, n] for clamp_min and the weighted mul/sum, [n] for topk (k=512), in ProfilerStep#2, #3,
#4 respectively (2 layers, so 2 of each per step). Each step takes milliseconds, not seconds.

growing_cast.json.gz -- scripts/seedmodel/growing.py: a 2-layer decode loop (hidden 1024,
8 heads x 128) whose KV read upcasts the valid rows of a bf16 [8192, 8, 128] cache to fp32:
aten::to / _to_copy / copy_ of [n, 8, 128] bf16 -> fp32 with n = 2048, 2049, 2050 in
ProfilerStep#2..#4 (one row more per step; 2 casts per step). Call site `kvcache.py(6): read`
(the cast is on line 8), caller `growing.py(35): forward`, then `growing.py(50): forward` and
`growing.py(61): decode`.
"""

from __future__ import annotations

import gzip
import os
import re
import socket
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = Path(__file__).resolve().parent / "seedmodel"
OUT_DIR = ROOT / "tests" / "data" / "seeds"


def scrub(text: str) -> str:
    """Keep the trace free of this machine: host name and absolute paths."""
    text = re.sub(r'"host_name": "[^"]*"', '"host_name": "sample-host"', text)
    for prefix in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, str(MODEL_DIR), str(ROOT), str(Path.home())},
                         key=len, reverse=True):
        text = text.replace(prefix.rstrip("/") + "/", "")
    host = socket.gethostname()
    if host:  # whole words only: a short host name ("vm") must not eat parts of op or frame names
        text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "sample-host", text)
    return text


def load(name: str, rel: str, package: bool = False) -> types.ModuleType:
    """Run seedmodel/<rel> as module `name`, compiled under the relative name `rel`.

    The relative name is what the profiler prints in Python frames (`attn/indexer.py(16): score`).
    """
    module = types.ModuleType(name)
    module.__file__ = rel
    if package:
        module.__path__ = []
    sys.modules[name] = module
    if "." in name:
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)
    exec(compile((MODEL_DIR / rel).read_text(), rel, "exec"), module.__dict__)
    return module


def profile_to(make, name: str) -> None:
    """Call make(json_name) in a scratch directory; write OUT_DIR/<name>.json.gz, gzipped with mtime 0."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            make(f"{name}.json")
            text = Path(f"{name}.json").read_text()
        finally:
            os.chdir(cwd)
    data = scrub(text).encode()
    target = OUT_DIR / f"{name}.json.gz"
    with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(data)
    print(f"{target.relative_to(ROOT)}: {len(data):,} bytes of JSON, {target.stat().st_size:,} gzipped")


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    names = ("attn", "attn.indexer", "model", "kvcache", "growing")
    saved = {n: sys.modules.get(n) for n in names}
    try:
        load("attn", "attn/__init__.py", package=True)
        load("attn.indexer", "attn/indexer.py")
        model = load("model", "model.py")
        load("kvcache", "kvcache.py")
        growing = load("growing", "growing.py")
        profile_to(lambda path: model.make_trace(False, path), "indexer_buggy")
        profile_to(lambda path: model.make_trace(True, path), "indexer_fixed")
        profile_to(growing.make_trace, "growing_cast")
    finally:
        for n, module in saved.items():
            if module is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = module


if __name__ == "__main__":
    main()
