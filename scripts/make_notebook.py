"""Write notebooks/walkthrough.ipynb: the first seed story replayed on the sample traces.

The notebook is generated so that it stays clean (no outputs, no execution counts, fixed cell
ids): edit the cells here, then run `python scripts/make_notebook.py`. tests/test_notebooks.py
fails when the committed notebook differs from what this script writes, and executes it.
Needs nbformat (in the `test-all` extra).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"

CELLS = [
    ("md", """\
# Walkthrough: a whole-cache cast, found and fixed

The project's two sample traces profile a tiny decoder on CPU. In `samples/buggy.json.gz` its
`_read_cache` casts the whole preallocated fp8 KV cache (16384 token slots × 576) to bf16 in
each of its 2 layers on every step; `samples/fixed.json.gz` casts only the slots in use. It is
the bug of a real GPU decode profile (one 857 MB cast per layer, 78 per step) at toy size.

The notebook ingests both traces into a throw-away store, finds the cast with the
`copies-by-call-site` report, compares the runs with `diff`, and plots step time, the top ops
and the timeline of one step, all with traceduck's Python API: `traceduck.ingest`,
`traceduck.open`, and the database's `report`, `diff` and `sql`, which return DuckDB relations
(`.df()` gives a pandas DataFrame). The `assert` lines check what a reader should see, so the
notebook fails when traceduck stops finding it: CI executes every notebook."""),
    ("code", """\
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

import traceduck

SAMPLES = Path("..") / "samples"  # the notebook runs from notebooks/
store_dir = tempfile.TemporaryDirectory(prefix="traceduck-walkthrough-")
STORE = Path(store_dir.name) / "store"  # deleted in the last cell"""),
    ("md", """\
## Ingest

One run per file. `name=` lets every later cell select the runs as `buggy` and `fixed` rather
than by run id (a hash of the file's bytes). Ingest flattens each trace once into Parquet
tables; everything after it is SQL over DuckDB views, or a canned report built on them."""),
    ("code", """\
for name in ("buggy", "fixed"):
    (result,) = traceduck.ingest(SAMPLES / f"{name}.json.gz", store=STORE, name=name)
    print(f"{result.name}: run {result.run_id}, {result.events:,} events in {result.seconds:.2f} s")

db = traceduck.open(STORE)
db.sql("SELECT name, event_count, (end_ns - start_ns) / 1e6 AS span_ms FROM runs ORDER BY name").df()"""),
    ("md", """\
## The largest copies, with their call sites

`db.report("copies-by-call-site", runs="buggy")` (`traceduck report copies-by-call-site --run
buggy` on the command line) groups the outermost
copy and cast ops by Python call site, op, source dims and dtypes, most bytes moved first. The
top row of the buggy run is the whole cache: dims `[16384, 1, 576]`, fp8 to bf16, 2 calls per
step (one per layer), 16384 × 576 × (1 + 2) = 28,311,552 bytes read and written per call, from
`tinydecoder.py(31): _read_cache`."""),
    ("code", """\
copies = db.report("copies-by-call-site", runs="buggy", limit=5).df()
copies"""),
    ("code", """\
top = copies.iloc[0]
assert top.call_site == "tinydecoder.py(31): _read_cache", top
assert list(top.dims) == [16384, 1, 576], top
assert (top.src_dtype, top.dst_dtype) == ("float8_e4m3fn", "bfloat16"), top
assert top.calls_per_step == 2, top  # one cast per layer
assert top.bytes_per_call == 16384 * 576 * (1 + 2), top  # every slot read as fp8 (1 byte), written as bf16 (2)"""),
    ("md", """\
## Compare the runs

`db.diff("buggy", "fixed", per_step=True)` is `traceduck diff buggy fixed --per-step`: calls
(in all and per step) and time per step of every op in each run, biggest change first.
`aten::copy_`, where the cast's bytes move, accounts for almost all of the difference."""),
    ("code", """\
ops = db.diff("buggy", "fixed", per_step=True).df()
ops.head(8)"""),
    ("md", """\
`by="copy"` compares the copy groups of `copies-by-call-site`: the whole-cache cast is
`removed`, and casts of the used slots only (`[103, 1, 576]` … `[105, 1, 576]`, the prompt plus
the tokens decoded so far) are `added`."""),
    ("code", """\
copy_rows = db.diff("buggy", "fixed", by="copy", per_step=True).df()

whole = copy_rows.iloc[0]
assert whole.key == "tinydecoder.py(31): _read_cache | aten::to [16384, 1, 576] float8_e4m3fn -> bfloat16", whole
assert whole.status == "removed", whole
copy_rows.head(6)"""),
    ("md", """\
## Step time per run

The `steps` report has one row per `ProfilerStep#N` window. The profiler's schedule skips 2
steps (wait and warmup), so the active steps are numbered 2 to 4: about 29.8 ms each in the
buggy run against 1.2 ms in the fixed one."""),
    ("code", """\
steps = db.report("steps").df()
steps["dur_ms"] = steps.dur_ns / 1e6
per_run = steps.groupby("run_name").dur_ms.agg(["count", "mean"])
assert list(per_run["count"]) == [3, 3], per_run
assert per_run["mean"]["buggy"] > 20 * per_run["mean"]["fixed"], per_run

ax = steps.pivot(index="step", columns="run_name", values="dur_ms").plot.bar(figsize=(7, 3.5), rot=0)
for bars in ax.containers:
    ax.bar_label(bars, fmt="%.1f", fontsize=8)
ax.set(title="Time per profiler step", xlabel="ProfilerStep#", ylabel="ms")
plt.show()"""),
    ("md", """\
## Top ops

`top-ops` is `key_averages().table()`: per op, calls and self time over the run. In the buggy
run `aten::copy_` holds 98% of it; in the fixed run copies still come first, at about 40% of a
total 25 times smaller, followed by the model's matmuls (`aten::addmm`, `aten::mm`)."""),
    ("code", """\
fig, axes = plt.subplots(1, 2, figsize=(12, 3.5), layout="constrained")
for ax, run in zip(axes, ["buggy", "fixed"]):
    top_ops = db.report("top-ops", runs=run, limit=8).df()
    bars = ax.barh(top_ops.name[::-1], top_ops.self_dur_ns[::-1] / 1e6)
    ax.bar_label(bars, labels=[f"{pct:.1f}%" for pct in top_ops.self_pct[::-1]], fontsize=8, padding=2)
    ax.set(title=f"{run}: top ops by self time", xlabel="self time over the run's 3 steps, ms")
    if run == "buggy":
        assert top_ops.name[0] == "aten::copy_" and top_ops.self_pct[0] > 90, top_ops.head(3)
plt.show()"""),
    ("md", """\
## The timeline of one step

The CPU ops of the first profiled step, one lane per thread and nesting level (`depth` on the
thread, Python frames left out), times from the step's start. Copies and casts, the rows of the
`tensor_copies` view, are orange. The sample ran on CPU, so there are no GPU streams. Each run
has its own time axis: the buggy step is about 20 times longer, and the cast of each layer
(`aten::to` over `aten::_to_copy` over `aten::copy_`, one orange column each) fills most of it."""),
    ("code", '''\
(STEP,), = db.sql("SELECT min(step) FROM steps").fetchall()
timeline = db.sql("""
    SELECT r.name AS run, o.tid, o.name, o.call_site,
           (o.ts_ns - s.ts_ns) / 1e6 AS start_ms, o.dur_ns / 1e6 AS ms, s.dur_ns / 1e6 AS step_ms,
           dense_rank() OVER (PARTITION BY o.run_id, o.tid ORDER BY o.depth) - 1 AS level,
           c.event_id IS NOT NULL AS is_copy
    FROM cpu_ops o
    JOIN steps s ON s.run_id = o.run_id AND s.step = o.step
    JOIN runs r ON r.run_id = o.run_id
    LEFT JOIN tensor_copies c ON c.run_id = o.run_id AND c.event_id = o.event_id
    WHERE o.step = ?
    ORDER BY r.name, o.tid, level, o.ts_ns""", [STEP]).df()

fig, axes = plt.subplots(2, 1, figsize=(12, 7), layout="constrained")
for ax, (run, ops_in_step) in zip(axes, timeline.groupby("run")):
    lanes = ops_in_step[["tid", "level"]].drop_duplicates().reset_index(drop=True)
    for y, lane in lanes.iterrows():
        lane_ops = ops_in_step[(ops_in_step.tid == lane.tid) & (ops_in_step.level == lane.level)]
        ax.broken_barh(list(zip(lane_ops.start_ms, lane_ops.ms)), (y - 0.4, 0.8),
                       facecolors=["tab:orange" if c else "tab:blue" for c in lane_ops.is_copy])
    ax.set_yticks(range(len(lanes)), [f"thread {t}, level {lv}" for t, lv in zip(lanes.tid, lanes.level)],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set(title=f"{run}: ProfilerStep#{STEP}, {ops_in_step.step_ms.iloc[0]:.1f} ms",
           xlabel="ms from the start of the step", xlim=(0, ops_in_step.step_ms.iloc[0]))
axes[0].legend(handles=[Patch(color="tab:orange", label="copy / cast"), Patch(color="tab:blue", label="other op")],
               loc="upper right")
plt.show()

longest = timeline[timeline.run == "buggy"].sort_values("ms").iloc[-1]
assert longest.is_copy and longest.call_site == "tinydecoder.py(31): _read_cache", longest'''),
    ("md", """\
## How close do the ops run to the GPU's limits?

The samples ran on a CPU, so they have no GPU time to set against the hardware. This section
ingests a GPU trace: `TRACEDUCK_GPU_TRACE` names one, else it takes the public H100 BERT trace of
TraceLens's tests from the shared real traces that the project's tests use (`../shared/traces/`
beside the checkout), and skips when neither is there. The `roofline` report groups the ops that
have a cost model (`op_cost`: FLOPs and bytes from their input dims and dtypes) by name, dims and
dtype, with the GPU time of the kernels they launched and the device's peaks (`device_peaks`,
chosen by the trace's GPU name). Each group is a point: FLOPs per byte against achieved TFLOP/s,
sized by its GPU time, under the roof `min(peak TFLOP/s, intensity x peak TB/s)`."""),
    ("code", """\
import os

GPU_TRACE = Path(os.environ.get("TRACEDUCK_GPU_TRACE", Path("..", "..", "shared", "traces", "public", "AMD-AGI__TraceLens",
                                                             "tests", "traces", "h100", "gaunernst_bert-small-uncased__1016001.json.gz")))
if not GPU_TRACE.is_file():
    print(f"no GPU trace at {GPU_TRACE}: set TRACEDUCK_GPU_TRACE to a PyTorch profiler trace of a GPU run")
else:
    traceduck.ingest(GPU_TRACE, store=STORE, name="gpu")
    roof = db.report("roofline", runs="gpu").df().dropna(subset=["tflops_per_s", "intensity", "peak_tflops"])
    roof = roof[roof.intensity > 0]
    peak_tf, peak_bw = roof.peak_tflops.max(), roof.peak_tbps.max()
    fig, ax = plt.subplots(figsize=(8, 5))
    x = [min(roof.intensity.min(), 1) / 2, max(roof.intensity.max(), peak_tf / peak_bw) * 2]
    xs = [x[0], peak_tf / peak_bw, x[1]]
    ax.plot(xs, [min(peak_tf, v * peak_bw) for v in xs], color="black", label=f"roof: {roof.device.iloc[0]}")
    for category, group in roof.groupby("category"):
        ax.scatter(group.intensity, group.tflops_per_s, s=20 + 400 * group.dur_ns / roof.dur_ns.max(),
                   alpha=0.6, label=category)
    for _, r in roof.nlargest(3, "lost_dur_ns").iterrows():
        ax.annotate(r.op_name.split("::")[-1], (r.intensity, r.tflops_per_s), fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="FLOPs per byte", ylabel="achieved TFLOP/s",
           title="Ops against the roofline (point size: GPU time)")
    ax.legend(fontsize=8)
    plt.show()
    assert (roof.tflops_per_s <= roof.peak_tflops).all() and (roof.tb_per_s <= roof.peak_tbps).all(), roof
    display(roof.head(5)[["op_name", "input_dims", "calls", "dur_ns", "tflops_per_s", "compute_pct", "bound",
                          "lost_dur_ns"]])"""),
    ("md", """\
## Over time: the launch queue, copy bandwidth and allocated memory

Table macros bucket the GPU run's time series for plots: `queue_length_series(bucket_ns)` (each
stream's launch queue, the `idle` report's, time-weighted per bucket), `memory_bw_series(bucket_ns)`
(copy bandwidth per kind) and the view `memory_allocated` (`Total Allocated` of every `[memory]`
event); `queue_full_time(max_queue_length)` is the time each queue held that many launches or more.
`traceduck export gpu -o gpu.json --counters queue,memory,bandwidth` puts the same series into the
trace as counter tracks."""),
    ("code", """\
if GPU_TRACE.is_file():
    queue = db.sql("SELECT * FROM queue_length_series(1000000) WHERE run_id IN (SELECT run_id FROM runs WHERE name = 'gpu')").df()
    bw = db.sql("SELECT * FROM memory_bw_series(1000000) WHERE run_id IN (SELECT run_id FROM runs WHERE name = 'gpu')").df()
    mem = db.sql("SELECT m.ts_ns - r.start_ns AS t_ns, m.device, m.total_allocated FROM memory_allocated m "
                 "JOIN runs r USING (run_id) WHERE r.name = 'gpu' ORDER BY m.ts_ns").df()
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.2), layout="constrained")
    for stream, g in queue.groupby("stream"):
        axes[0].step(g.bucket_start_ns / 1e6, g.mean_queue_length, where="post", label=f"stream {stream}")
    axes[0].set(xlabel="ms after the run's start", ylabel="launches queued (mean per ms)", title="Launch queue")
    axes[0].legend(fontsize=8)
    for kind, g in bw.groupby("kind"):
        axes[1].bar(g.bucket_start_ns / 1e6, g.gb_s, width=1, align="edge", label=kind)
    axes[1].set(xlabel="ms after the run's start", ylabel="GB/s (mean per ms)", title="Copy bandwidth")
    axes[1].legend(fontsize=8)
    for device, g in mem.groupby("device"):
        axes[2].step(g.t_ns / 1e6, g.total_allocated / 2**20, where="post", label=device)
    axes[2].set(xlabel="ms after the run's start", ylabel="MiB allocated", title="Allocated memory")
    axes[2].legend(fontsize=8)
    plt.show()
    assert len(queue) > 0 and (queue.mean_queue_length <= queue.max_queue_length).all(), queue
    display(db.sql("SELECT * FROM queue_full_time(max_queue_length := 1)").df())"""),
    ("md", """\
The same questions work from the command line (`traceduck report copies-by-call-site`,
`traceduck diff buggy fixed --per-step`) and from any DuckDB client over `traceduck catalog`.
The store was temporary: close the connection and delete it."""),
    ("code", """\
db.close()
store_dir.cleanup()"""),
]


def build() -> nbformat.NotebookNode:
    """The notebook, without outputs, with stable cell ids."""
    cells = []
    for i, (kind, source) in enumerate(CELLS):
        cell = new_markdown_cell(source) if kind == "md" else new_code_cell(source)
        cell["id"] = f"cell-{i:02d}"
        cells.append(cell)
    return new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })


def main() -> None:
    NOTEBOOK.parent.mkdir(exist_ok=True)
    nbformat.write(build(), NOTEBOOK)
    print(f"wrote {NOTEBOOK.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
