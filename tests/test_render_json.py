"""json output (render._write_json): every value type DuckDB hands Python, written as before the
writer moved from orjson to msgspec (the expected text below is what orjson wrote)."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid

from traceduck import render

ROW = (1, 1.5, "é\u2028\x01", None, True, float("nan"), float("inf"), decimal.Decimal("1.50"), dt.timedelta(seconds=1.5),
       b"\x01\xff", uuid.UUID(int=5), dt.datetime(2024, 1, 2, 3, 4, 5, 123), dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc),
       dt.date(2024, 1, 2), dt.time(1, 2, 3), [1, decimal.Decimal("2.5"), [b"a"]], {"k": [1.0, None]}, {1: "a", 2.5: "b"},
       {None: 1, True: 2, dt.date(2024, 1, 1): 3, dt.datetime(2024, 1, 1, 2): 4}, (1, 2), 12345678.9, 1e-7,
       2**63 - 1, -0.0, 2**70)
EXPECTED = ('{"c0":1,"c1":1.5,"c2":"é\u2028\\u0001","c3":null,"c4":true,"c5":null,"c6":null,"c7":1.5,'
            '"c8":"0:00:01.500000","c9":"01ff","c10":"00000000-0000-0000-0000-000000000005",'
            '"c11":"2024-01-02T03:04:05.000123","c12":"2024-01-02T00:00:00+00:00","c13":"2024-01-02","c14":"01:02:03",'
            '"c15":[1,2.5,["61"]],"c16":{"k":[1.0,null]},"c17":{"1":"a","2.5":"b"},'
            '"c18":{"null":1,"true":2,"2024-01-01":3,"2024-01-01T02:00:00":4},"c19":[1,2],"c20":12345678.9,'
            '"c21":1e-7,"c22":9223372036854775807,"c23":-0.0,"c24":1180591620717411303424}')


def test_json_output_writes_every_value_type_as_before():
    columns = [f"c{i}" for i in range(len(ROW))]
    out = io.StringIO()
    render._write_json(columns, [[ROW, ROW[:2] + (None,) * (len(ROW) - 2)]], out)
    lines = out.getvalue().split("\n")[:-1]  # not splitlines: U+2028 is a line end to it
    assert lines[0] == "[" and lines[-1] == "]"
    assert lines[1] == f"  {EXPECTED},"
    assert json.loads(out.getvalue())[1] == {c: (1, 1.5)[i] if i < 2 else None for i, c in enumerate(columns)}


def test_json_output_spells_exponents_without_plus():
    """msgspec writes 1e16 where orjson wrote 1e+16: the same number."""
    out = io.StringIO()
    render._write_json(["x"], [[(1e16,), (1.5e-300,)]], out)
    assert out.getvalue() == '[\n  {"x":1e16},\n  {"x":1.5e-300}\n]\n'
    assert [r["x"] for r in json.loads(out.getvalue())] == [1e16, 1.5e-300]
