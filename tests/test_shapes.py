"""shapes: one row per op input (TensorList members apart), dims as real BIGINT[] lists."""

from __future__ import annotations

import traceduck

from conftest import load_json, shared_dir, trace_events, write_trace

# torch's spelling of the `Input type` names the shared traces use, written out by hand
TORCH_NAMES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
               "c10::Float8_e4m3fn": "float8_e4m3fn", "long int": "int64", "long": "int64", "int": "int32",
               "unsigned char": "uint8", "signed char": "int8", "bool": "bool"}
NOT_TENSORS = {"Scalar", "ScalarList", "TensorList", "GenericList", "Int", "Bool", "Double", "", None}


def _canonical(t, member):
    if member is not None or t in NOT_TENSORS:
        return None  # a TensorList's members have no type of their own
    return TORCH_NAMES[t]


def _expected_rows(events):
    rows = []
    for i, e in enumerate(events):
        a = e.get("args") or {}
        dims = a.get("Input Dims", a.get("Input dims"))
        if not isinstance(dims, list):
            continue
        types = a.get("Input type") or []
        for k, d in enumerate(dims):
            t = types[k] if k < len(types) else None
            if d and all(isinstance(x, list) for x in d):
                rows += [(i, k, m, md, _canonical(t, m), t) for m, md in enumerate(d)]
            else:
                rows.append((i, k, None, d, _canonical(t, None), t))
    return rows


def test_shapes_match_input_dims(store):
    path = shared_dir() / "cpu/train.json.gz"
    events = trace_events(load_json(path, exact=False))
    expected = _expected_rows(events)
    traceduck.ingest(path, store=store)
    with traceduck.open(store) as db:
        got = db.sql("SELECT event_id, input_index, member_index, dims, dtype, dtype_raw FROM shapes "
                     "ORDER BY event_id, input_index, member_index NULLS FIRST").fetchall()
        members = db.sql("SELECT count(*) FROM shapes WHERE member_index IS NOT NULL").fetchall()[0][0]
        typ = db.sql("SELECT typeof(dims) FROM shapes LIMIT 1").fetchall()[0][0]
    assert [tuple(r) for r in got] == expected
    assert members > 0  # aten::cat takes a TensorList
    assert typ == "BIGINT[]"


def test_bytes_of_the_whole_cache_cast(store):
    traceduck.ingest(shared_dir() / "cpu/full.json", store=store)
    with traceduck.open(store) as db:
        rows = db.sql("""SELECT s.input_index, s.dims, s.dtype, s.dtype_raw, s.numel, s.elem_bytes, s.bytes
                         FROM events e JOIN shapes s USING (run_id, event_id)
                         WHERE e.name = 'aten::copy_' AND s.dims = [65536, 1, 576]
                         ORDER BY e.event_id, s.input_index LIMIT 2""").fetchall()
    n = 65536 * 576
    assert rows == [(0, [65536, 1, 576], "bfloat16", "c10::BFloat16", n, 2, 2 * n),
                    (1, [65536, 1, 576], "float8_e4m3fn", "c10::Float8_e4m3fn", n, 1, n)]


def test_scalars_and_odd_inputs(tmp_path, store):
    args = {"Input Dims": [[2, 3], [], [], [[4], [5, 6]], "x"],
            "Input type": ["float", "Scalar", "c10::Half", "TensorList", "long int"],
            "Concrete Inputs": ["", "1.5", "", "", ""]}
    odd = {"Input Dims": [[2], [3]], "Input type": ["c10::NewFloat9", {"x": 1}]}  # unknown to traceduck
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0, "args": args}
    traceduck.ingest(write_trace(tmp_path / "s.json", [ev, {**ev, "ts": 5.0, "args": odd}]), store=store)
    with traceduck.open(store) as db:
        rows = db.sql("""SELECT event_id, input_index, member_index, dims, dtype, dtype_raw, concrete, numel, bytes
                         FROM shapes ORDER BY event_id, input_index, member_index NULLS FIRST""").fetchall()
    assert rows == [
        (0, 0, None, [2, 3], "float32", "float", "", 6, 24),
        (0, 1, None, [], None, "Scalar", "1.5", None, None),
        (0, 2, None, [], "float16", "c10::Half", "", 1, 2),  # a 0-dim tensor
        (0, 3, 0, [4], None, "TensorList", "", 4, None),
        (0, 3, 1, [5, 6], None, "TensorList", "", 30, None),
        (0, 4, None, None, "int64", "long int", "", None, None),  # dims that are not a list
        (1, 0, None, [2], None, "c10::NewFloat9", None, None, None),
        (1, 1, None, [3], None, '{"x":1}', None, None, None),
    ]


def test_op_inputs_lists_each_ops_inputs_in_order(store):
    """op_inputs: one row per op that recorded shapes, its inputs' dims and dtypes in position order,
    TensorList inputs left out (shapes holds them as one row per member), against json."""
    path = shared_dir() / "cpu/train.json.gz"
    events = trace_events(load_json(path, exact=False))
    expected = {}
    lists = 0
    for i, e in enumerate(events):
        a = e.get("args") or {}
        dims = a.get("Input Dims")
        if e.get("cat") != "cpu_op" or not isinstance(dims, list):
            continue
        types = a.get("Input type") or []
        kept = [k for k, d in enumerate(dims) if not (d and all(isinstance(x, list) for x in d))]
        lists += len(dims) - len(kept)
        if kept:
            expected[i] = ([dims[k] for k in kept], [_canonical(types[k] if k < len(types) else None, None) for k in kept])
    traceduck.ingest(path, store=store)
    with traceduck.open(store) as db:
        got = db.sql("SELECT event_id, input_dims, input_dtypes, input_dims_text FROM op_inputs").fetchall()
        cpu_ops = {r[0] for r in db.sql("SELECT event_id FROM cpu_ops").fetchall()}
    assert {r[0]: (r[1], r[2]) for r in got if r[0] in cpu_ops} == expected and len(expected) > 100
    assert lists > 0  # aten::cat takes a TensorList
    texts = {r[0]: r[3] for r in got}
    sample = next(i for i, (d, _) in expected.items() if len(d) >= 2 and all(d))
    assert texts[sample] == "[" + ", ".join("[" + ", ".join(map(str, d)) + "]" for d in expected[sample][0]) + "]"
