"""Reference rows loaded into every connection: dtypes, call-site rules, copy ops.

They are tables (not constants baked into SQL) so a session can change them, e.g.
`INSERT INTO call_site_rules VALUES ('vendored/%', 'vendored library')`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pyarrow as pa

from .dtypes import DTYPES, SCALAR_TYPE_CODES, SCALAR_TYPE_NAMES

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


def dtype_rows() -> pa.Table:
    """One row per Kineto type name, plus ScalarType codes that no type name maps to."""
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
    cols = list(zip(*rows))
    return pa.table({
        "type_name": pa.array(cols[0], pa.string()),
        "scalar_type": pa.array(cols[1], pa.int32()),
        "torch_name": pa.array(cols[2], pa.string()),
        "elem_bytes": pa.array(cols[3], pa.int32()),
        "is_tensor": pa.array(cols[4], pa.bool_()),
        "scalar_type_name": pa.array([SCALAR_TYPE_NAMES.get(c) for c in cols[1]], pa.string()),
    })


@cache
def stdlib_function_rows() -> pa.Table:
    """(file, function) for every function of the standard library, files relative to its directory."""
    files, names = [], []
    for line in STDLIB_FUNCTIONS.read_text().splitlines():
        if line and not line.startswith("#"):
            file, _, defined = line.partition("\t")
            for name in defined.split(" "):
                files.append(file)
                names.append(name)
    return pa.table({"file": pa.array(files, pa.string()), "function": pa.array(names, pa.string())})


def tables() -> dict[str, pa.Table]:
    """Rows of each reference table, by table name."""
    rules = list(zip(*CALL_SITE_RULES))
    ops = list(zip(*COPY_OPS))
    return {
        "dtypes": dtype_rows(),
        "call_site_rules": pa.table({"pattern": list(rules[0]), "reason": list(rules[1])}),
        "stdlib_functions": stdlib_function_rows(),
        "copy_ops": pa.table({
            "name": list(ops[0]),
            "source_input": pa.array(ops[1], pa.int32()),
            "dest_input": pa.array(ops[2], pa.int32()),
            "dtype_input": pa.array(ops[3], pa.int32()),
            "has_dtype_arg": pa.array(ops[4], pa.bool_()),
            "always_copies": pa.array(ops[5], pa.bool_()),
            "writes_whole_dest": pa.array(ops[6], pa.bool_()),
        }),
    }
