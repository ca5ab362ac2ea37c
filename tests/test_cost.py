"""op_cost, run_devices, the roofline report and top-ops by category: FLOPs and bytes redone in
plain Python from the definitions (2*M*K*N per matrix product, ...) over the trace JSON."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import pytest

import traceduck

from conftest import load_json, run_report, shared_dir, trace_events, write_trace

TRACELENS = "public/AMD-AGI__TraceLens/tests/traces"
H100 = f"{TRACELENS}/h100/gaunernst_bert-small-uncased__1016001.json.gz"
MI300 = f"{TRACELENS}/mi300/gaunernst_bert-small-uncased__1016001.json.gz"
B200 = f"{TRACELENS}/b200/eager_trace.json.gz"  # a vLLM decode: its own rms_norm ops, mm, embedding
EB = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "int": 4, "bool": 1}


def numel(dims) -> int:
    return math.prod(dims)


class Trace:
    """A hand-made GPU trace: ops with shapes, each launching one kernel of a known duration."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.t = 1000
        self.corr = 1

    def op(self, name, dims, types, concrete=None, kernel_ns=None, children=(), work=("kernel", "k")):
        """An op (dur covers its children), its kernel launched from inside it; returns its event id."""
        start = self.t
        ev = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": start, "dur": 0,
              "args": {"Input Dims": dims, "Input type": types,
                       "Concrete Inputs": concrete if concrete is not None else [""] * len(dims)}}
        self.events.append(ev)
        event_id = len(self.events) - 1
        self.t += 1
        for child in children:
            child()
        if kernel_ns:
            self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                                "ts": self.t, "dur": 1, "args": {"correlation": self.corr}})
            self.events.append({"ph": "X", "cat": work[0], "name": f"{work[1]}{self.corr}", "pid": 0, "tid": 7,
                                "ts": self.t + 5, "dur": kernel_ns / 1000,
                                "args": {"correlation": self.corr, "device": 0, "stream": 7}})
            self.corr += 1
            self.t += 2
        self.t += 1
        ev["dur"] = self.t - start
        self.t += 1
        return event_id


def gemm(batch, m, k, n, bias=False):
    return 2 * batch * m * k * n + (batch * m * n if bias else 0)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Ops of known size, with their expected (flops, bytes, gpu_dur_ns) by event id."""
    t = Trace()
    exp = {}
    bf, f32 = "c10::BFloat16", "float"
    # linear -> addmm: the addmm launches the GEMM, the linear gets its time too
    inner = {}
    lin = t.op("aten::linear", [[4, 8, 16], [32, 16], [32]], [bf, bf, bf], kernel_ns=None,
               children=[lambda: inner.setdefault("addmm", t.op(
                   "aten::addmm", [[32], [32, 16], [16, 32], [], []], [bf, bf, bf, "Scalar", "Scalar"],
                   ["", "", "", "1", "1"], kernel_ns=2000))])
    # torch counts no bias (flop_counter's addmm_flop, computeFlops); TraceLens adds m*n (flops_with_bias)
    lin_cost = (gemm(1, 32, 16, 32), (32 * 16 + 32 * 16 + 32 + 32 * 32) * 2, 2000)
    exp[lin] = lin_cost
    exp[inner["addmm"]] = lin_cost
    with_bias = {lin: gemm(1, 32, 16, 32, True), inner["addmm"]: gemm(1, 32, 16, 32, True)}
    exp[t.op("aten::bmm", [[3, 5, 7], [3, 7, 11]], ["c10::Half"] * 2, kernel_ns=1500)] = \
        (gemm(3, 5, 7, 11), (3 * 5 * 7 + 3 * 7 * 11 + 3 * 5 * 11) * 2, 1500)
    # broadcast batch dims: [2, 1] with [3] -> 6 products
    exp[t.op("aten::matmul", [[2, 1, 5, 7], [3, 7, 4]], [f32, f32], kernel_ns=1000)] = \
        (gemm(6, 5, 7, 4), (2 * 5 * 7 + 3 * 7 * 4 + 6 * 5 * 4) * 4, 1000)
    # conv2d: stride 2, padding 1 -> 16 x 16 outputs; flops 2 * N * C_out * out * C_in/g * k (+ bias: with_bias)
    out = (32 + 2 - 2 - 1) // 2 + 1
    exp[t.op("aten::conv2d", [[2, 3, 32, 32], [8, 3, 3, 3], [8], [], [], [], []], [f32, f32, f32, "ScalarList",
             "ScalarList", "ScalarList", "Int"], ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"], kernel_ns=3000)] = \
        (2 * 2 * 8 * out * out * 3 * 9, (2 * 3 * 32 * 32 + 8 * 3 * 9 + 8 + 2 * 8 * out * out) * 4, 3000)
    with_bias[next(reversed(exp))] = 2 * 2 * 8 * out * out * 3 * 9 + 2 * 8 * out * out
    # its backward, every gradient asked for: grad_input and grad_weight cost a forward each (torch's
    # conv_backward_flop); grad_bias (one add per grad_output element) only in flops_with_bias
    cb_dims = [[2, 8, out, out], [2, 3, 32, 32], [8, 3, 3, 3]] + [[]] * 8
    cb_types = [f32, f32, f32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Int",
                "ScalarList"]
    cb = t.op("aten::convolution_backward", cb_dims, cb_types,
              ["", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, True]"], kernel_ns=6000)
    exp[cb] = (2 * (2 * 2 * 8 * out * out * 3 * 9),
               (2 * 8 * out * out + 2 * (2 * 3 * 32 * 32) + 2 * (8 * 3 * 9) + 8) * 4, 6000)
    with_bias[cb] = exp[cb][0] + 2 * 8 * out * out
    # grouped (2 groups), grad_weight alone: torch counts it over all 4 input channels, twice the
    # forward's 2 * N * C_out * L_out * C_in/g * k = 576
    cw = t.op("aten::convolution_backward", [[1, 6, 8], [1, 4, 10], [6, 2, 3]] + [[]] * 8, cb_types,
              ["", "", "", "[6]", "[1]", "[0]", "[1]", "False", "[0]", "2", "[False, True, False]"], kernel_ns=700)
    exp[cw] = (3 * 8 * 4 * 6 * 1 * 2, (48 + 40 + 36 + 36) * 4, 700)
    assert exp[cw][0] == 2 * 576
    # output_mask not recorded: all three gradients
    cu = t.op("aten::convolution_backward", [[1, 6, 8], [1, 4, 10], [6, 4, 3]] + [[]] * 8, cb_types,
              ["", "", "", "[6]", "[1]", "[0]", "[1]", "False", "[0]", "1", ""], kernel_ns=650)
    exp[cu] = (2 * (2 * 1 * 6 * 8 * 4 * 3), (48 + 2 * 40 + 2 * 72 + 6) * 4, 650)
    with_bias[cu] = exp[cu][0] + 48
    # transposed: (5 - 1) * 2 - 0 + (3 - 1) + 1 + 1 = 12; flops over the input's positions
    tout = (5 - 1) * 2 + 2 + 1 + 1
    exp[t.op("aten::conv_transpose2d", [[1, 4, 5, 5], [4, 2, 3, 3], [], [], [], [], [], []],
             [f32, f32, "", "ScalarList", "ScalarList", "ScalarList", "Int", "ScalarList"],
             ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "1", "[1, 1]"], kernel_ns=800)] = \
        (2 * 1 * 4 * 25 * 2 * 9, (4 * 25 + 4 * 2 * 9 + 2 * tout * tout) * 4, 800)
    # attention: 4*B*H*S*S*D, halved when causal
    q = [2, 4, 128, 64]
    exp[t.op("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [bf] * 3 + ["Scalar"] * 4,
             ["", "", "", "0.", "True", "False", ""], kernel_ns=5000)] = \
        (4 * 2 * 4 * 128 * 128 * 64 // 2, 4 * numel(q) * 2, 5000)
    exp[t.op("aten::_scaled_dot_product_flash_attention", [q, [2, 4, 256, 64], [2, 4, 256, 64], [], [], [], []],
             [bf] * 3 + ["Scalar"] * 4, ["", "", "", "0.", "True", "False", ""], kernel_ns=5000)] = \
        (None, (numel(q) * 2 + 2 * 2 * 4 * 256 * 64) * 2, 5000)  # causal with Sq != Sk: no guess
    exp[t.op("aten::layer_norm", [[4, 16], [], [16], [16], [], []], [bf, "ScalarList", bf, bf, "Scalar", "Scalar"],
             ["", "[16]", "", "", "1e-05", "True"], kernel_ns=700)] = (64 * (5 + 2), (64 + 16 + 16 + 64) * 2, 700)
    # rms_norm: sum of squares (2) and x * rstd (1) per element, one more for the weight
    exp[t.op("aten::rms_norm", [[4, 16], [], [16], []], [bf, "ScalarList", bf, "Scalar"], ["", "[16]", "", "1e-06"],
             kernel_ns=650)] = (64 * (2 + 1 + 1), (64 + 16 + 64) * 2, 650)
    # batch norm over [2, 8, 4, 4] (256 elements) with weight, bias and running stats of 8: training
    # computes the statistics (3 + 2 + 1 + 1 per element), eval only normalises (2 + 1 + 1)
    bn_dims = [[2, 8, 4, 4], [8], [8], [8], [8], [], [], [], []]
    bn_types = [f32] * 5 + ["Scalar"] * 4
    exp[t.op("aten::batch_norm", bn_dims, bn_types, ["", "", "", "", "", "True", "0.1", "1e-05", "True"],
             kernel_ns=620)] = (256 * 7, (256 + 4 * 8 + 256) * 4, 620)
    exp[t.op("aten::batch_norm", bn_dims, bn_types, ["", "", "", "", "", "False", "0.1", "1e-05", "True"],
             kernel_ns=610)] = (256 * 4, (256 + 4 * 8 + 256) * 4, 610)
    exp[t.op("aten::group_norm", [[2, 8, 4, 4], [], [8], [8], [], []], [f32, "Int", f32, f32, "Scalar", "Scalar"],
             ["", "4", "", "", "1e-05", "True"], kernel_ns=630)] = (256 * 7, (256 + 8 + 8 + 256) * 4, 630)
    # index_select along dim 0 of a [100, 8] table with 5 indices: indices + 5 rows read + 5 rows written
    exp[t.op("aten::index_select", [[100, 8], [], [5]], [f32, "Int", "long int"], ["", "0", ""], kernel_ns=150)] = \
        (0, 5 * 8 + 2 * 5 * 8 * 4, 150)
    # conv1d with 2 groups: [1, 4, 10] * [6, 2, 3] -> [1, 6, 8]; 2 * N * C_out * L_out * C_in/g * k
    exp[t.op("aten::conv1d", [[1, 4, 10], [6, 2, 3], [], [], [], [], []],
             [f32, f32, "", "ScalarList", "ScalarList", "ScalarList", "Int"], ["", "", "", "[1]", "[0]", "[1]", "2"],
             kernel_ns=900)] = (2 * 1 * 6 * 8 * 2 * 3, (40 + 36 + 48) * 4, 900)
    # baddbmm: beta * self + alpha * (batch1 @ batch2), the add counted once per output in flops_with_bias only
    exp[t.op("aten::baddbmm", [[3, 5, 11], [3, 5, 7], [3, 7, 11], [], []], [f32, f32, f32, "Scalar", "Scalar"],
             ["", "", "", "1", "1"], kernel_ns=1200)] = \
        (gemm(3, 5, 7, 11), (3 * 5 * 11 + 3 * 5 * 7 + 3 * 7 * 11 + 3 * 5 * 11) * 4, 1200)
    with_bias[next(reversed(exp))] = gemm(3, 5, 7, 11, True)
    exp[t.op("aten::softmax", [[4, 16], [], []], [f32, "Int", ""], ["", "-1", ""], kernel_ns=600)] = \
        (5 * 64, 2 * 64 * 4, 600)
    exp[t.op("aten::mul", [[4, 1, 16], [3, 16]], [f32, f32], kernel_ns=500)] = \
        (4 * 3 * 16, (64 + 48 + 4 * 3 * 16) * 4, 500)
    exp[t.op("aten::gt", [[4, 16], []], [f32, "Scalar"], ["", "0"], kernel_ns=450)] = (64, 64 * 4 + 64 * 1, 450)
    exp[t.op("aten::gelu", [[10, 10], []], [bf, ""], ["", "'none'"], kernel_ns=400)] = (100, 2 * 100 * 2, 400)
    exp[t.op("aten::sum", [[4, 6, 5], [], [], []], [f32, "ScalarList", "Scalar", ""], ["", "[1]", "False", ""],
             kernel_ns=300)] = (120, (120 + 20) * 4, 300)
    exp[t.op("aten::embedding", [[100, 8], [3, 4], [], [], []], [f32, "long int", "Scalar", "Scalar", "Scalar"],
             ["", "", "-1", "False", "False"], kernel_ns=200)] = (0, 12 * 8 + 2 * 12 * 8 * 4, 200)
    exp[t.op("aten::copy_", [[10, 10], [10, 10], []], [bf, f32, "Scalar"], ["", "", "False"], kernel_ns=100)] = \
        (0, 100 * 4 + 100 * 2, 100)
    # copies: a device-to-device copy's time counts, a host-to-device one's does not (the link bounds it)
    exp[t.op("aten::copy_", [[50], [50], []], [f32, f32, "Scalar"], ["", "", "False"], kernel_ns=90,
             work=("gpu_memcpy", "Memcpy DtoD (Device -> Device) "))] = (0, 50 * 4 * 2, 90)
    exp[t.op("aten::copy_", [[60], [60], []], [f32, f32, "Scalar"], ["", "", "True"], kernel_ns=80,
             work=("gpu_memcpy", "Memcpy HtoD (Pinned -> Device) "))] = (0, 60 * 4 * 2, None)
    path = write_trace(tmp_path_factory.mktemp("cost") / "generated.json", t.events,
                       deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}])
    store = path.parent / "store"
    # the same op on a GPU no device_peaks row knows, and in a trace that names no GPU (runs are
    # named after their files)
    u = Trace()
    u.op("aten::mm", [[64, 64], [64, 64]], [f32, f32], kernel_ns=1000)
    unknown = write_trace(path.parent / "unknown.json", u.events, deviceProperties=[{"id": 0, "name": "Fancy GPU"}])
    unnamed = write_trace(path.parent / "unnamed.json", u.events[:1] + [dict(e, ts=e["ts"] + 0.5) for e in u.events[1:]])
    traceduck.ingest([path, unknown, unnamed], store=store)
    return traceduck.open(store), exp, {lin, inner["addmm"]}, with_bias


def test_generated_ops_have_the_formulas_costs(generated):
    db, exp, _, _ = generated
    rows = {r[0]: r[1:] for r in db.sql("SELECT event_id, flops, bytes, gpu_dur_ns, tflops_per_s, tb_per_s FROM op_cost "
                                        "JOIN runs USING (run_id) WHERE runs.name = 'generated'").fetchall()}
    for event_id, (flops, nbytes, gpu_ns) in exp.items():
        got = rows[event_id]
        assert got[:3] == (flops, nbytes, gpu_ns), (event_id, got)
        # achieved TFLOP/s = flops / GPU time (flops per ns / 1000)
        assert got[3] == (None if flops is None or gpu_ns is None else pytest.approx(flops / gpu_ns / 1e3))
        assert got[4] == (None if gpu_ns is None else pytest.approx(nbytes / gpu_ns / 1e3))


def test_flops_follow_torch_and_flops_with_bias_tracelens(generated):
    db, exp, _, with_bias = generated
    rows = dict(db.sql("SELECT event_id, flops_with_bias FROM op_cost JOIN runs USING (run_id) "
                       "WHERE runs.name = 'generated'").fetchall())
    for event_id, (flops, _, _) in exp.items():
        assert rows[event_id] == with_bias.get(event_id, flops), event_id
    assert all(with_bias[e] > exp[e][0] for e in with_bias)


def test_nested_ops_are_counted_once(generated):
    db, exp, nested, _ = generated
    lin, addmm = sorted(nested)
    counted = dict(db.sql("SELECT event_id, is_counted FROM op_cost JOIN runs USING (run_id) "
                          "WHERE runs.name = 'generated'").fetchall())
    assert counted[lin] and not counted[addmm]  # the outermost op with a cost
    assert all(counted[e] for e in exp if e not in nested and exp[e][0] is not None)


def test_custom_gemm_ops_are_costed_and_wrappers_count_once(tmp_path):
    """vLLM's cutlass_scaled_mm launches its GEMM itself: its FLOPs come from its own a [M, K] and
    b [K, N] (2MNK, torch's count); an op without a formula around aten::mm leaves the mm counted
    once, and a costed op around a costed one counts only the outer."""
    t = Trace()
    fp8, bf, f32 = "c10::Float8_e4m3fn", "c10::BFloat16", "float"
    m, k, n = 16, 64, 32
    scaled = t.op("_C::cutlass_scaled_mm", [[m, n], [m, k], [k, n], [m, 1], [1, n], []], [bf, fp8, fp8, f32, f32, ""],
                  kernel_ns=4000)
    inner = {}
    wrapper = t.op("vllm::my_gemm", [[m, k], [k, n]], [bf, bf], children=[lambda: inner.setdefault("mm", t.op(
        "aten::mm", [[m, k], [k, n]], [bf, bf], kernel_ns=3000))])
    path = write_trace(tmp_path / "custom.json", t.events, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}])
    traceduck.ingest(path, store=tmp_path / "s")
    with traceduck.open(tmp_path / "s") as db:
        rows = {r[0]: r[1:] for r in db.sql("SELECT event_id, op_name, flops, gpu_dur_ns, is_counted FROM op_cost").fetchall()}
    assert rows[scaled] == ("_C::cutlass_scaled_mm", 2 * m * n * k, 4000, True)
    assert rows[wrapper] == ("vllm::my_gemm", None, 3000, False)  # no formula of its own: its mm counts, once
    assert rows[inner["mm"]] == ("aten::mm", 2 * m * n * k, 3000, True)


def test_generated_trace_picks_the_h100_and_draws_the_roofline(generated):
    db, exp, nested, _ = generated
    dev = db.sql("SELECT name, device_name, device, bf16_tflops, memory_tbps FROM run_devices JOIN runs USING (run_id) "
                 "ORDER BY name").fetchall()
    assert dev == [("generated", "NVIDIA H100 80GB HBM3", "H100 SXM", 989.4, 3.35), ("unknown", "Fancy GPU", None, None, None),
                   ("unnamed", None, None, None, None)]
    cols, rows = run_report(db, "roofline", runs=["generated"])
    rows = [dict(zip(cols, r)) for r in rows]
    lin = next(r for r in rows if r["op_name"] == "aten::linear")
    flops, nbytes, gpu_ns = exp[min(nested)]
    roof = max(flops / (989.4 * 1e3), nbytes / (3.35 * 1e3))
    assert (lin["calls"], lin["flops"], lin["bytes"], lin["dur_ns"], lin["time_basis"]) == (1, flops, nbytes, gpu_ns, "gpu")
    assert lin["roofline_dur_ns"] == round(roof) and lin["lost_dur_ns"] == gpu_ns - round(roof)
    assert lin["bound"] == ("compute" if flops / nbytes >= 989.4 / 3.35 else "memory")
    assert lin["compute_pct"] == pytest.approx(round(100 * round(flops / gpu_ns / 1e3, 3) / 989.4, 2), abs=0.02)
    assert [r["lost_dur_ns"] for r in rows if r["lost_dur_ns"] is not None] == \
        sorted((r["lost_dur_ns"] for r in rows if r["lost_dur_ns"] is not None), reverse=True)
    # parameters override the device's peaks
    cols, rows = run_report(db, "roofline", runs=["generated"], params=["peak_tflops=100", "peak_tbps=1"])
    lin = next(dict(zip(cols, r)) for r in rows if r[cols.index("op_name")] == "aten::linear")
    assert (lin["peak_tflops"], lin["peak_tbps"], lin["device"]) == (100.0, 1.0, "parameters")
    assert lin["roofline_dur_ns"] == round(max(flops / 1e5, nbytes / 1e3))


@pytest.mark.slow  # 2 s
def test_unknown_device_says_how_to_give_peaks(generated):
    db, _, _, _ = generated
    flops, nbytes = gemm(1, 64, 64, 64), 3 * 64 * 64 * 4
    for run, where in (("unknown", "device 'Fancy GPU'"), ("unnamed", "this run (the trace names no device)")):
        cols, rows = run_report(db, "roofline", runs=[run])
        (row,) = [dict(zip(cols, r)) for r in rows]
        assert (row["flops"], row["bytes"], row["dur_ns"]) == (flops, nbytes, 1000)
        assert row["tflops_per_s"] == round(flops / 1000 / 1e3, 6)
        assert (row["peak_tflops"], row["peak_tbps"], row["bound"], row["roofline_dur_ns"], row["device"]) == (None,) * 5
        assert row["note"] == (f"no peaks known for {where}: pass --param device=NAME (a device of device_peaks), "
                               "or --param peak_tflops=N --param peak_tbps=N, or add a row to device_peaks")
        cols, rows = run_report(db, "roofline", runs=[run], params=["peak_tflops=10", "peak_tbps=2"])
        row = dict(zip(cols, rows[0]))
        assert (row["note"], row["roofline_dur_ns"]) == (None, round(max(flops / 1e4, nbytes / 2e3)))


# deviceProperties as AMD's driver reports an MI300X (the SGLang trace's, 206141652992 bytes = 191.98 GiB)
# and an MI325X (256 GiB), with the empty name vLLM's traces on MI300X carry
MI300X_PROPS = {"name": "", "computeMajor": 9, "computeMinor": 4, "numSms": 304, "totalGlobalMem": 206141652992}
MI325X_PROPS = dict(MI300X_PROPS, totalGlobalMem=256 * 2**30)


@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_unnamed_device_identified_from_its_properties(tmp_path):
    """An empty deviceProperties name: compute capability 9.4, 304 CUs and the memory tell MI300X from
    MI325X; properties no row has (96 GiB) identify nothing. The roofline's note says how."""
    u = Trace()
    u.op("aten::mm", [[64, 64], [64, 64]], ["float", "float"], kernel_ns=1000)
    traces = [write_trace(tmp_path / f"{name}.json", u.events, deviceProperties=[dict(props, id=0)])
              for name, props in (("mi300x", MI300X_PROPS), ("mi325x", MI325X_PROPS),
                                  ("odd", dict(MI300X_PROPS, totalGlobalMem=96 * 2**30)))]
    traceduck.ingest(traces, store=tmp_path / "store")
    with traceduck.open(tmp_path / "store") as db:
        dev = db.sql("SELECT name, device_id, device_name, compute_capability, num_sms, memory_gib, device, identified_by, "
                     "fp32_tflops, memory_tbps FROM run_devices JOIN runs USING (run_id) ORDER BY name").fetchall()
        assert dev == [("mi300x", 0, "", "9.4", 304, 191.98, "MI300X", "properties", 163.4, 5.3),
                       ("mi325x", 0, "", "9.4", 304, 256.0, "MI325X", "properties", 163.4, 6.0),
                       ("odd", 0, "", "9.4", 304, 96.0, None, None, None, None)]
        cols, rows = run_report(db, "roofline", runs=["mi300x"])
        (row,) = [dict(zip(cols, r)) for r in rows]
        flops, nbytes = gemm(1, 64, 64, 64), 3 * 64 * 64 * 4
        assert (row["device"], row["peak_tflops"], row["peak_tbps"]) == ("MI300X", 163.4, 5.3)
        assert row["roofline_dur_ns"] == round(max(flops / 163.4e3, nbytes / 5.3e3))
        assert row["note"] == ("peaks of MI300X, identified from deviceProperties (compute capability 9.4, 304 SMs/CUs, "
                               "191.98 GiB) as the trace names no device; pass --param device=NAME to choose another")
        cols, rows = run_report(db, "roofline", runs=["odd"])
        assert dict(zip(cols, rows[0]))["note"] == (
            "no peaks known for this run (the trace names no device): pass --param device=NAME (a device of device_peaks), "
            "or --param peak_tflops=N --param peak_tbps=N, or add a row to device_peaks")


@pytest.mark.slow  # several seconds: new processes or a store built for it
def test_device_parameter_picks_the_peaks(generated):
    """--param device names a device_peaks device for the runs, whatever their trace says."""
    db, _, _, _ = generated
    flops, nbytes = gemm(1, 64, 64, 64), 3 * 64 * 64 * 4
    for run in ("unnamed", "unknown"):
        cols, rows = run_report(db, "roofline", runs=[run], params=["device=mi300x"])
        (row,) = [dict(zip(cols, r)) for r in rows]
        # float32 GEMM: MI300X's FP32 peak 163.4 TFLOP/s, 5.3 TB/s (device_peaks.csv, AMD's page)
        assert (row["device"], row["peak_tflops"], row["peak_tbps"]) == ("MI300X", 163.4, 5.3)
        assert row["roofline_dur_ns"] == round(max(flops / 163.4e3, nbytes / 5.3e3))
        assert row["note"] == "peaks of MI300X (--param device)"
    cols, rows = run_report(db, "roofline", runs=["unnamed"], params=["device=Fancy GPU"])
    row = dict(zip(cols, rows[0]))
    assert (row["device"], row["peak_tflops"], row["roofline_dur_ns"]) == (None, None, None)
    assert row["note"] == ("no device_peaks row is named 'Fancy GPU' (--param device): name one of its devices, "
                           "or pass --param peak_tflops=N --param peak_tbps=N")


@pytest.mark.slow  # 3 s
def test_device_entry_is_the_one_the_kernels_ran_on(tmp_path):
    """run_devices takes the deviceProperties entry of the device with the most kernel time, else the
    only entry: SGLang's MI300X trace runs its kernels on device 9 and lists id 0 only; HTA's MI250
    trace lists 4 dies. Plain json."""
    rels = ["public/AMD-AGI__TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
            "public/facebookresearch__HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"]
    want = {}
    for rel in rels:
        doc = load_json(shared_dir() / rel)
        per_device = {}
        for e in trace_events(doc):
            if e.get("cat") == "kernel":
                d = e["args"]["device"]
                per_device[d] = per_device.get(d, 0) + _ns(e["dur"])
        ids = [p["id"] for p in doc["deviceProperties"]]
        ran_on = max(per_device, key=per_device.get)
        entry = next((p for p in doc["deviceProperties"] if p["id"] == ran_on), None)
        if entry is None:
            assert len(ids) == 1
            entry = doc["deviceProperties"][0]
        want[rel] = (entry["id"], entry["name"], entry["numSms"], f"{entry['computeMajor']}.{entry['computeMinor']}")
    assert want[rels[0]][0] == 0 and want[rels[1]][0] in (0, 1, 2, 3)
    traceduck.ingest([shared_dir() / r for r in rels], store=tmp_path / "store")
    with traceduck.open(tmp_path / "store") as db:
        got = {r[0]: r[1:] for r in db.sql("SELECT r.name, device_id, device_name, num_sms, compute_capability, device "
                                           "FROM run_devices JOIN runs r USING (run_id)").fetchall()}
    names = [rel.rsplit("/", 1)[1][:-len(".json.gz")] for rel in rels]
    # by name: 'AMD Instinct MI300X'; 'AMD Radeon Graphics' with 104 CUs
    assert [got[n] for n in names] == [want[rels[0]] + ("MI300X",), want[rels[1]] + ("MI250 (one die) / MI210",)]


def test_top_ops_by_category(generated):
    db, _, _, _ = generated
    cols, rows = run_report(db, "top-ops", runs=["generated"], params=["group_by=category"])
    by = {r[cols.index("name")]: r[cols.index("calls")] for r in rows}
    # GEMM: linear, addmm, bmm, matmul, baddbmm; convolution: conv2d, conv_transpose2d, conv1d, convolution_backward x 3;
    # normalisation: layer_norm, rms_norm, batch_norm x 2, group_norm; copy: embedding, index_select, copy_ x 3
    assert by == {"GEMM": 5, "convolution": 6, "attention": 2, "normalisation": 5, "reduction": 2,
                  "elementwise": 3, "copy": 5}


def _ns(v) -> int:
    return int(Decimal(v) * 1000)


def _expected_from_json(path: Path) -> dict[int, tuple]:
    """(flops, bytes, gpu_ns) of every addmm, mm, linear, SDPA, layer_norm, vLLM rms_norm and
    fused_add_rms_norm, embedding, gelu and add in the trace,
    computed from its args; gpu_ns from the kernels, device-to-device copies and sets whose launch
    (runtime or driver call) lies inside the op on its thread."""
    events = [e for e in trace_events(load_json(path)) if isinstance(e, dict)]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})]
    kernels = {}  # kernels, device-to-device copies and sets by correlation
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memset") or (e.get("cat") == "gpu_memcpy" and e["name"].startswith("Memcpy DtoD")):
            kernels.setdefault(e["args"]["correlation"], 0)
            kernels[e["args"]["correlation"]] += _ns(e["dur"])
    out = {}
    for i, e in enumerate(events):
        if e.get("cat") != "cpu_op" or "Input Dims" not in e.get("args", {}):
            continue
        a = e["args"]
        d, ty = a["Input Dims"], a["Input type"]
        name = e["name"]
        if name == "aten::addmm":
            (m, k), n = d[1], d[2][1]
            cost = (gemm(1, m, k, n), (m * k + k * n + numel(d[0]) + m * n) * EB[ty[1]])  # torch: no bias
        elif name == "aten::linear":
            k, n = d[0][-1], d[1][0]
            m = numel(d[0]) // k
            bias = bool(d[2])
            cost = (gemm(1, m, k, n), (numel(d[0]) + numel(d[1]) + (numel(d[2]) if bias else 0) + m * n) * EB[ty[0]])
        elif name in ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention"):
            b, h, s, dh = d[0]
            causal = a["Concrete Inputs"][5 if name == "aten::scaled_dot_product_attention" else 4] == "True"
            cost = (4 * b * h * s * d[1][2] * dh // (2 if causal else 1), 4 * numel(d[0]) * EB[ty[0]])
        elif name == "aten::layer_norm":
            cost = (numel(d[0]) * 7, (2 * numel(d[0]) + numel(d[2]) + numel(d[3])) * EB[ty[0]])
        elif name == "aten::gelu":
            cost = (numel(d[0]), 2 * numel(d[0]) * EB[ty[0]])
        elif name == "aten::add" and d[0] == d[1]:
            cost = (numel(d[0]), 3 * numel(d[0]) * EB[ty[0]])
        elif name == "aten::mm":
            (m, k), n = d[0], d[1][1]
            cost = (gemm(1, m, k, n), (m * k + k * n + m * n) * EB[ty[0]])
        elif name == "_C::rms_norm":  # vLLM's (out, input, weight, eps): reads input and weight, writes out
            x = numel(d[1])
            cost = (x * (2 + 1 + 1), (2 * x + numel(d[2])) * EB[ty[1]])
        elif name == "_C::fused_add_rms_norm":  # (input, residual, weight, eps) in place: residual added first
            x = numel(d[0])
            cost = (x * (1 + 2 + 1 + 1), (2 * x + numel(d[2]) + 2 * x) * EB[ty[0]])
        elif name == "aten::embedding":  # (weight, indices, ...): the indices, and each row read and written
            rows = numel(d[1])
            cost = (0, rows * EB[ty[1]] + 2 * rows * d[0][1] * EB[ty[0]])
        else:
            continue
        start, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
        gpu = sum(kernels.get(x["args"]["correlation"], 0) for x in launches
                  if x["tid"] == e["tid"] and start <= _ns(x["ts"]) and _ns(x["ts"]) + _ns(x["dur"]) <= end)
        out[i] = (*cost, gpu or None)
    return out


@pytest.mark.slow  # 5 s each
@pytest.mark.parametrize("trace,device", [(H100, "H100 SXM"), (MI300, "MI300X"), (B200, "B200")])
def test_real_shapes_costs_and_device(tmp_path, trace, device):
    path = shared_dir() / trace
    traceduck.ingest(path, store=tmp_path / "store", name="real")
    db = traceduck.open(tmp_path / "store")
    expected = _expected_from_json(path)
    assert len(expected) > 40
    rows = {r[0]: r[1:] for r in db.sql("SELECT event_id, flops, bytes, gpu_dur_ns, tflops_per_s FROM op_cost").fetchall()}
    for event_id, (flops, nbytes, gpu_ns) in expected.items():
        assert rows[event_id][:3] == (flops, nbytes, gpu_ns), (event_id, rows[event_id])
        if gpu_ns:
            assert rows[event_id][3] == pytest.approx(flops / gpu_ns / 1e3)
    assert db.sql("SELECT device FROM run_devices").fetchall() == [(device,)]
    cols, rows = run_report(db, "roofline")
    assert rows and all(r[cols.index("device")] == device for r in rows)


@pytest.mark.slow  # 4 s
def test_cpu_run_rates_come_from_cpu_time(tmp_path):
    """A run without GPU work: the rates are the CPU's, over the ops' inclusive CPU time; no peaks, no note."""
    path = shared_dir() / "cpu" / "full.json"
    traceduck.ingest(path, store=tmp_path / "store", name="cpu")
    db = traceduck.open(tmp_path / "store")
    cols, rows = run_report(db, "roofline")
    rows = [dict(zip(cols, r)) for r in rows]
    assert rows and all(r["time_basis"] == "cpu" and r["peak_tflops"] is None and r["note"] is None for r in rows)
    # the whole-cache cast, from plain json: aten::to of the fp8 [65536, 1, 576] cache to bf16 (its inclusive time)
    casts = [e for e in trace_events(load_json(path)) if e.get("name") == "aten::to"
             and e["args"]["Input Dims"][0] == [65536, 1, 576]]
    dur_ns = sum(int(round(e["dur"] * 1000)) for e in casts)
    row = next(r for r in rows if r["op_name"] == "aten::to" and r["input_dims"].startswith("[[65536, 1, 576]"))
    nbytes = len(casts) * 65536 * 576 * (1 + 2)  # read fp8, write bf16
    assert (row["calls"], row["dur_ns"], row["bytes"], row["flops"]) == (len(casts), dur_ns, nbytes, 0)
    assert row["tb_per_s"] == round(nbytes / dur_ns / 1e3, 6) > 0


@pytest.mark.slow  # 3 s
def test_odd_inputs_give_null_costs_not_errors(tmp_path):
    """Shapes that do not fit a formula (wrong ranks, a zero stride, missing inputs, unparsable
    Concrete Inputs) leave flops NULL rather than failing the view."""
    t = Trace()
    f32 = "float"
    odd = [
        t.op("aten::mm", [[4], [4, 4]], [f32, f32]),  # a vector is not a matrix for mm
        t.op("aten::bmm", [[2, 3, 4], [5, 4, 6]], [f32, f32]),  # batch sizes differ
        t.op("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []], [f32, f32, "", "ScalarList", "ScalarList",
             "ScalarList", "Int"], ["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"]),  # zero stride
        t.op("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []], [f32, f32, "", "ScalarList", "ScalarList",
             "ScalarList", "Int"], ["", "", "", "x", "y", "z", "w"]),  # unparsable
        t.op("aten::scaled_dot_product_attention", [[8, 64], [8, 64], [8, 64]], [f32] * 3),  # no causal flag recorded
        t.op("aten::add", [[]], [""]),  # no tensor
        t.op("aten::sum", [[3, 4], [], []], [f32, "ScalarList", "Scalar"], ["", "[9]", "False"]),  # dim out of range
    ]
    path = write_trace(tmp_path / "odd.json", t.events)
    traceduck.ingest(path, store=tmp_path / "store")
    db = traceduck.open(tmp_path / "store")
    rows = dict(db.sql("SELECT event_id, flops FROM op_cost").fetchall())
    assert {e: rows[e] for e in odd} == {e: (None if e != odd[-1] else 12) for e in odd}
