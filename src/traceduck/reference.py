"""The vocabulary traceduck reads traces with, defined once: reference rows loaded into every
connection (event categories, dtypes, call-site rules, copy ops, op categories, device peaks).
Ingest and the views both read them from here; the name patterns (ProfilerStep#N, launch calls)
are SQL macros in sql/views/00_reference.sql, which ingest loads too.

The rows are tables (not constants baked into SQL) so a session can change them, e.g.
`INSERT INTO call_site_rules VALUES ('vendored/%', 'vendored library')`. Ingest classifies events
with the rows as shipped (events.on_device, events.is_cpu_op): changing event_categories in a
session changes what the views select, not what ingest stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from .dtypes import DTYPES, SCALAR_TYPE_CODES, SCALAR_TYPE_NAMES


@dataclass(frozen=True)
class Category:
    """One spelling of a trace event category (`cat`) and what its events are."""

    name: str  # exactly as written in `cat`
    kind: str  # one of KINDS
    origin: str  # who writes it
    # Names of this category LIKE this are record_function annotations, not ops (legacy Operator).
    annotation_name_like: str | None = None


# What the events of a category are. Device work (kernel, memcpy, memset) is what the GPU views
# and utilization count; device_annotation also runs on the device's timeline but is not work.
KINDS = {
    "op": "CPU operator",
    "annotation": "CPU-side record_function range (ProfilerStep#N, user ranges)",
    "python": "Python frame (with_stack)",
    "instant": "CPU instant event ([memory] allocations and frees)",
    "runtime": "host runtime or driver call; the ones named like a launch start device work",
    "sync": "host-device synchronization record",
    "kernel": "device work: a kernel",
    "memcpy": "device work: a memory copy",
    "memset": "device work: a memory set",
    "device_annotation": "record_function range on the device's timeline",
    "flow": "flow arrow (s/t/f) between events",
    "counter": "counter samples",
    "profiler": "the profiler's own spans and records",
    "metadata": "process and thread metadata",
    "other": "known, not used by traceduck's views",
}
DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset")
DEVICE_KINDS = (*DEVICE_WORK_KINDS, "device_annotation")
# A `ProfilerStep#N` event of these kinds (on the CPU) opens a profiler step's window.
STEP_MARKER_KINDS = ("annotation", "op")

# Every category PyTorch's profiler (Kineto) writes, 2021 on, and a few other tracers' ones;
# anything else is kept and counted in runs.warnings as an unknown category.
EVENT_CATEGORIES = [
    Category("cpu_op", "op", "Kineto 2023+"),
    Category("Operator", "op", "Kineto 2021 (old name of cpu_op)", annotation_name_like="%#%"),
    Category("user_annotation", "annotation", "Kineto"),
    Category("python_function", "python", "Kineto, with_stack=True"),
    Category("cpu_instant_event", "instant", "Kineto"),
    Category("Memory", "instant", "Kineto 2021"),
    Category("cuda_runtime", "runtime", "Kineto: CUDA runtime; HIP calls on ROCm too"),
    Category("cuda_driver", "runtime", "Kineto: CUDA driver (cuLaunchKernel, cuLaunchKernelEx)"),
    Category("Runtime", "runtime", "Kineto 2021 (old name of cuda_runtime)"),
    Category("hip_runtime", "runtime", "HIP runtime under its own name"),
    Category("mtia_runtime", "runtime", "Kineto: MTIA"),
    Category("xpu_runtime", "runtime", "Kineto: Intel XPU"),
    Category("xpu_driver", "runtime", "Kineto: Intel XPU"),
    Category("privateuse1_runtime", "runtime", "Kineto: PrivateUse1 (out-of-tree) backends"),
    Category("privateuse1_driver", "runtime", "Kineto: PrivateUse1 (out-of-tree) backends"),
    Category("hpu_op", "runtime", "Kineto: Intel Gaudi (HPU) host runtime"),
    Category("glow_runtime", "runtime", "Kineto: Glow"),
    Category("cuda_sync", "sync", "Kineto: CUDA"),
    Category("cuda_event", "sync", "Kineto: CUDA event records"),
    Category("xpu_sync", "sync", "Kineto: Intel XPU"),
    # Kineto writes the kernels, copies and sets of CUDA, ROCm, XPU and PrivateUse1 devices alike
    # as kernel / gpu_memcpy / gpu_memset.
    Category("kernel", "kernel", "Kineto: CUDA, ROCm, XPU, PrivateUse1, MTIA"),
    Category("Kernel", "kernel", "Kineto 2021"),
    Category("mtia_ccp_events", "kernel", "Kineto: MTIA on-device events (Kineto counts them as kernels)"),
    Category("gpu_op", "kernel", "device ops of tracers other than Kineto"),
    Category("gpu_memcpy", "memcpy", "Kineto"),
    Category("Memcpy", "memcpy", "Kineto 2021"),
    Category("memcpy", "memcpy", "lower-case spelling of Memcpy"),
    Category("gpu_memset", "memset", "Kineto"),
    Category("Memset", "memset", "Kineto 2021"),
    Category("memset", "memset", "lower-case spelling of Memset"),
    Category("gpu_user_annotation", "device_annotation", "Kineto"),
    Category("ac2g", "flow", "Kineto 2023+: launch to device work"),
    Category("fwdbwd", "flow", "Kineto: forward op to backward node"),
    Category("async", "flow", "Kineto 2021: launch to device work"),
    Category("async_cpu_to_gpu", "flow", "Kineto 2022: launch to device work"),
    Category("async_gpu", "flow", "Kineto 2022: launch to device work"),
    Category("critical_path", "flow", "critical-path analysis output"),
    Category("gpu_pm_counter", "counter", "Kineto"),
    Category("mtia_counters", "counter", "Kineto: MTIA"),
    Category("Trace", "profiler", "Kineto: the profiling span"),
    Category("overhead", "profiler", "Kineto: profiler overhead"),
    Category("cuda_profiler_range", "profiler", "Kineto: CUPTI profiler ranges"),
    Category("external_correlation", "profiler", "Kineto"),
    Category("mtia_insight", "profiler", "Kineto: MTIA"),
    Category("mtia_workloadd", "profiler", "Kineto: MTIA"),
    Category("xpu_scope_profiler", "profiler", "Kineto: Intel XPU"),
    Category("collective_comm", "other", "Kineto"),
    Category("__metadata", "metadata", "Chrome trace viewer"),
    Category("PERF", "other", "Chrome trace viewer samples"),
    Category("PREF", "other", "Chrome trace viewer samples"),
    Category("SAMPLE", "other", "Chrome trace viewer samples"),
]


def categories(*kinds: str) -> tuple[str, ...]:
    """The category spellings of these kinds."""
    return tuple(c.name for c in EVENT_CATEGORIES if c.kind in kinds)


DEVICE_CATEGORIES = categories(*DEVICE_KINDS)
OP_CATEGORIES = categories("op")
STEP_CATEGORIES = categories(*STEP_MARKER_KINDS)
KNOWN_CATEGORIES = tuple(c.name for c in EVENT_CATEGORIES)


def event_category_rows() -> dict[str, list]:
    """The event_categories table, by column."""
    cs = EVENT_CATEGORIES
    return {
        "category": [c.name for c in cs],
        "kind": [c.kind for c in cs],
        "is_device": [c.kind in DEVICE_KINDS for c in cs],
        "is_device_work": [c.kind in DEVICE_WORK_KINDS for c in cs],
        "is_runtime": [c.kind == "runtime" for c in cs],
        "is_op": [c.kind == "op" for c in cs],
        "annotation_name_like": [c.annotation_name_like for c in cs],
        "is_step_marker": [c.kind in STEP_MARKER_KINDS for c in cs],
        "origin": [c.origin for c in cs],
    }


# Paths that are not the user's code. The profiler writes a file relative to the `sys.path` entry
# it was found under (`torch/nn/modules/module.py`, `copy.py`, the user's `model/layers.py`), so
# the absolute patterns catch what older profilers wrote and files outside `sys.path`.
CALL_SITE_RULES = [
    ("torch/%", "torch itself"),
    ("%/torch/%", "torch itself (absolute path)"),
    ("%/torchinductor_%/%", "code torch.compile generated (Inductor's cache directory)"),
    ("<%", "interpreter pseudo-file such as <frozen os> or <string>"),
    ("%/site-packages/%", "an installed package (absolute path)"),
    ("%/dist-packages/%", "an installed package (absolute path, Debian layout)"),
    ("%/lib/python_.%/%", "the standard library or an installed package (absolute path)"),
    ("%/lib64/python_.%/%", "the standard library or an installed package (absolute path, lib64 layout)"),
]
# The standard library's files and the functions each defines (scripts/make_stdlib_table.py).
STDLIB_FUNCTIONS = Path(__file__).resolve().parent / "stdlib_functions.txt"

# (op name, source input, destination input, input whose dtype the result takes, dtype code in
# Concrete Inputs[1], always copies, writes the whole destination). Ops that do not always copy
# (to, type_as, contiguous) return their input when it already has the dtype, device and layout
# asked for: they are copies only when a copy op runs inside them.
COPY_OPS = [
    ("aten::copy_", 1, 0, None, False, True, True),
    ("aten::copy", 1, 0, None, False, True, True),
    ("aten::_to_copy", 0, None, None, True, True, None),
    ("aten::clone", 0, None, None, False, True, None),
    ("aten::index_copy_", 3, 0, None, False, True, False),
    ("aten::index_copy", 3, None, None, False, True, None),
    ("aten::_copy_from", 0, 1, None, False, True, True),
    ("aten::_copy_from_and_resize", 0, 1, None, False, True, False),
    ("aten::to", 0, None, None, True, False, None),
    ("aten::type_as", 0, None, 1, False, False, None),
    ("aten::contiguous", 0, None, None, False, False, None),
]


# Op categories and cost formulas (sql/views/80_cost.sql, table op_categories): (pattern, category,
# model). An exact name picks the formula of op_cost (model) and the category; a LIKE pattern (with
# '%') gives a category only. Only ops whose inputs the formula's SQL knows by position get a model.
_GEMM = ["aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::_scaled_mm"]
_CONV = ["aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
         "aten::conv_transpose3d", "aten::convolution", "aten::_convolution"]
_ATTENTION = ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
              "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_efficient_attention",
              "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
              "aten::_efficient_attention_forward", "flash_attn::_flash_attn_forward"]
_NORMS = {
    "layer_norm": ["aten::layer_norm", "aten::native_layer_norm"],
    "rms_norm": ["aten::rms_norm", "aten::_fused_rms_norm", "_C::rms_norm", "_C::fused_add_rms_norm"],
    "batch_norm": ["aten::batch_norm", "aten::native_batch_norm", "aten::_batch_norm_impl_index",
                   "aten::cudnn_batch_norm", "aten::miopen_batch_norm"],
    "group_norm": ["aten::group_norm", "aten::native_group_norm"],
}
_SOFTMAX = ["aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax"]
_UNARY = ["abs", "neg", "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "exp2", "expm1", "log", "log2", "log1p",
          "sqrt", "rsqrt", "sin", "cos", "reciprocal", "erf", "sign", "floor", "ceil", "round", "trunc", "square",
          "hardswish", "hardsigmoid", "mish", "elu", "leaky_relu", "softplus", "logit", "logical_not", "bitwise_not",
          "clamp", "clamp_min", "clamp_max", "nan_to_num"]
_BINARY = ["add", "sub", "rsub", "mul", "div", "maximum", "minimum", "pow", "fmod", "remainder", "atan2",
           "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
           "bitwise_and", "bitwise_or", "bitwise_xor"]
_REDUCTIONS = ["sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "logsumexp", "all", "any",
               "var", "std", "norm", "linalg_vector_norm"]
OP_NAME_CATEGORIES: list[tuple[str, str, str | None, str]] = [
    *[(n, "GEMM", "gemm", "matrix product") for n in _GEMM],
    *[(n, "convolution", "conv", "convolution") for n in _CONV],
    *[(n, "attention", "attention", "attention forward") for n in _ATTENTION],
    *[(n, "normalisation", model, model.replace("_", " ")) for model, names in _NORMS.items() for n in names],
    *[(n, "reduction", "softmax", "softmax: row-wise max and sum") for n in _SOFTMAX],
    *[(f"aten::{n}{s}", "elementwise", "unary", "unary elementwise") for n in _UNARY for s in ("", "_")],
    *[(f"aten::{n}{s}", "elementwise", "binary", "binary elementwise") for n in _BINARY for s in ("", "_")],
    *[(f"aten::{n}", "reduction", "reduction", "reduction") for n in _REDUCTIONS],
    ("aten::embedding", "copy", "embedding", "embedding lookup: rows gathered"),
    ("aten::index_select", "copy", "gather", "rows gathered along a dim"),
    *[(name, "copy", "copy", "tensor copy or cast (see tensor_copies)") for name, *_ in COPY_OPS],
    # categories only (no formula)
    ("aten::cat", "copy", None, "concatenation"),
    ("aten::stack", "copy", None, "stacking"),
    ("aten::index", "copy", None, "advanced indexing"),
    ("aten::gather", "copy", None, "gather"),
    ("aten::scatter%", "copy", None, "scatter"),
    ("aten::index_put%", "copy", None, "indexed write"),
    ("aten::fill_", "copy", None, "memory fill"),
    ("aten::zero_", "copy", None, "memory fill"),
    ("aten::cumsum", "reduction", None, "scan"),
    ("aten::where", "elementwise", None, "ternary elementwise"),
    ("aten::addcmul%", "elementwise", None, "ternary elementwise"),
    ("aten::addcdiv%", "elementwise", None, "ternary elementwise"),
    ("aten::lerp%", "elementwise", None, "ternary elementwise"),
    ("aten::dropout", "elementwise", None, "dropout"),
    ("aten::native_dropout", "elementwise", None, "dropout"),
    ("aten::_foreach_%", "elementwise", None, "multi-tensor elementwise"),
    ("aten::%_backward", "other", None, "backward of an op (no formula)"),
    ("%attention%", "attention", None, "attention (no formula: backward, paged or custom)"),
    ("%flash_attn%", "attention", None, "FlashAttention"),
    ("%layer_norm%", "normalisation", None, "layer norm"),
    ("%rms_norm%", "normalisation", None, "RMS norm"),
    ("%batch_norm%", "normalisation", None, "batch norm"),
    ("%group_norm%", "normalisation", None, "group norm"),
    ("aten::conv%", "convolution", None, "convolution"),
    ("aten::cudnn_convolution%", "convolution", None, "convolution"),
    ("aten::miopen_convolution%", "convolution", None, "convolution"),
    ("aten::mkldnn_convolution%", "convolution", None, "convolution"),
    ("aten::%softmax%", "reduction", None, "softmax"),
    ("c10d::%", "communication", None, "torch.distributed collective"),
    ("nccl:%", "communication", None, "NCCL call"),
    ("record_param_comms", "communication", None, "torch.distributed collective record"),
    ("%all_reduce%", "communication", None, "all-reduce"),
    ("%allreduce%", "communication", None, "all-reduce"),
    ("%all_gather%", "communication", None, "all-gather"),
    ("%allgather%", "communication", None, "all-gather"),
    ("%reduce_scatter%", "communication", None, "reduce-scatter"),
    ("%alltoall%", "communication", None, "all-to-all"),
    ("%all_to_all%", "communication", None, "all-to-all"),
]

_NV = "https://www.nvidia.com/en-us/data-center/"
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"
# Peak dense throughput (without 2:4 sparsity, which the spec pages quote alongside at twice the
# figure) and memory bandwidth: (device, deviceProperties name pattern, SM/CU count or None,
# fp32, tf32, bf16, fp16, fp8 TFLOP/s, TB/s, source). MI250X and MI250 appear as one device per die:
# half the card's figures; MI210 is one die of the same kind, so it shares MI250's row.
DEVICE_PEAKS: list[tuple] = [
    ("H100 SXM", "%H100%HBM3%", None, 67.0, 494.7, 989.4, 989.4, 1978.9, 3.35, _NV + "h100/"),
    ("H100 SXM", "%H100%SXM%", None, 67.0, 494.7, 989.4, 989.4, 1978.9, 3.35, _NV + "h100/"),
    ("H100 PCIe", "%H100%PCIe%", None, 51.0, 378.0, 756.0, 756.0, 1513.0, 2.0, _NV + "h100/"),
    ("H200", "%H200", None, 67.0, 494.7, 989.4, 989.4, 1978.9, 4.8, _NV + "h200/"),
    ("V100 SXM2", "%V100%SXM2%", None, 15.7, None, None, 125.0, None, 0.9, _NV + "v100/"),
    ("V100 PCIe", "%V100%PCIE%", None, 14.0, None, None, 112.0, None, 0.9, _NV + "v100/"),
    ("A100 40GB", "%A100%40GB%", None, 19.5, 156.0, 312.0, 312.0, None, 1.555, _NV + "a100/"),
    ("A100 80GB SXM", "%A100%SXM%80GB%", None, 19.5, 156.0, 312.0, 312.0, None, 2.039, _NV + "a100/"),
    ("A100 80GB PCIe", "%A100%80GB%PCIe%", None, 19.5, 156.0, 312.0, 312.0, None, 1.935, _NV + "a100/"),
    ("L4", "NVIDIA L4", None, 30.3, 60.0, 121.0, 121.0, 242.0, 0.3, _NV + "l4/"),
    ("B200", "%B200%", None, 80.0, 1100.0, 2250.0, 2250.0, 4500.0, 8.0, _NV + "dgx-b200/"),
    ("MI250X (one die)", "%MI250X%", 110, 47.85, None, 191.5, 191.5, None, 1.6384, _AMD + "mi200/mi250x.html"),
    ("MI250X (one die)", "AMD Radeon Graphics", 110, 47.85, None, 191.5, 191.5, None, 1.6384, _AMD + "mi200/mi250x.html"),
    ("MI250 (one die) / MI210", "%MI250%", 104, 45.25, None, 181.0, 181.0, None, 1.6384, _AMD + "mi200/mi210.html"),
    ("MI250 (one die) / MI210", "%MI210%", None, 45.25, None, 181.0, 181.0, None, 1.6384, _AMD + "mi200/mi210.html"),
    ("MI250 (one die) / MI210", "AMD Radeon Graphics", 104, 45.25, None, 181.0, 181.0, None, 1.6384, _AMD + "mi200/mi210.html"),
    ("MI300X", "%MI300X%", None, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 5.3, _AMD + "mi300/mi300x.html"),
    ("MI325X", "%MI325X%", None, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 6.0, _AMD + "mi300/mi325x.html"),
]


def dtype_rows() -> dict[str, list]:
    """One row per Kineto type name, plus ScalarType codes that no type name maps to (by column)."""
    code_of = {name: code for code, (name, _size) in SCALAR_TYPE_CODES.items()}
    rows = []
    used = set()
    for d in DTYPES.values():
        code = code_of.get(d.canonical) if d.is_tensor else None
        used.add(code)
        rows.append((d.name, code, d.canonical if d.is_tensor else None, d.elem_bytes, d.is_tensor))
    for code, (name, size) in SCALAR_TYPE_CODES.items():
        if code not in used:
            rows.append((None, code, name, size, True))
    cols = [list(c) for c in zip(*rows)]
    return {"type_name": cols[0], "scalar_type": cols[1], "torch_name": cols[2], "elem_bytes": cols[3],
            "is_tensor": cols[4], "scalar_type_name": [SCALAR_TYPE_NAMES.get(c) for c in cols[1]]}


@cache
def stdlib_function_rows() -> dict[str, list]:
    """(file, function) for every function of the standard library, files relative to its directory."""
    files, names = [], []
    for line in STDLIB_FUNCTIONS.read_text().splitlines():
        if line and not line.startswith("#"):
            file, _, defined = line.partition("\t")
            for name in defined.split(" "):
                files.append(file)
                names.append(name)
    return {"file": files, "function": names}


def sources() -> list[Path]:
    """The files the reference rows come from (part of the view file's key, viewfile.cache_key)."""
    here = Path(__file__).resolve().parent
    return [here / "reference.py", here / "dtypes.py", STDLIB_FUNCTIONS]


def fill(con: duckdb.DuckDBPyConnection, names: list[str] | None = None) -> None:
    """Insert the rows of the reference tables (all, or these) into their empty tables on a connection.
    The values go in as lists, one per column (DuckDB casts them to the table's types): no Arrow,
    whose table constructor loads pandas, on the path of every query."""
    for table, columns in tables().items():
        if names is None or table in names:
            select = ", ".join(f'unnest(?) AS "{c}"' for c in columns)
            con.execute(f"INSERT INTO {table} BY NAME SELECT {select}", list(columns.values()))


def tables() -> dict[str, dict[str, list]]:
    """Rows of each reference table, by table name: {column: values}."""
    rules = list(zip(*CALL_SITE_RULES))
    ops = list(zip(*COPY_OPS))
    return {
        "event_categories": event_category_rows(),
        "dtypes": dtype_rows(),
        "call_site_rules": {"pattern": list(rules[0]), "reason": list(rules[1])},
        "stdlib_functions": stdlib_function_rows(),
        "copy_ops": {"name": list(ops[0]), "source_input": list(ops[1]), "dest_input": list(ops[2]),
                     "dtype_input": list(ops[3]), "has_dtype_arg": list(ops[4]), "always_copies": list(ops[5]),
                     "writes_whole_dest": list(ops[6])},
        "op_categories": _columns(OP_NAME_CATEGORIES, ["pattern", "category", "model", "note"]),
        "device_peaks": _columns(DEVICE_PEAKS, ["device", "name_pattern", "num_sms", "fp32_tflops", "tf32_tflops",
                                                "bf16_tflops", "fp16_tflops", "fp8_tflops", "memory_tbps", "source"]),
    }


def _columns(rows: list[tuple], names: list[str]) -> dict[str, list]:
    return {name: [r[i] for r in rows] for i, name in enumerate(names)}
