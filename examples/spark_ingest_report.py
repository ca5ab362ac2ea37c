"""Ingest a directory of rank traces on a Spark cluster, one task per file, and write one report.

    spark-submit --master spark://HOST:7077 \
        --conf spark.pyspark.python=/opt/venv/bin/python \
        examples/spark_ingest_report.py /shared/profiles/job42 /shared/job42.store \
        --report ranks --out /shared/job42-ranks.csv

TRACES is a directory (searched at any depth) or trace files; STORE a path that the driver and every
worker read and write (a shared file system). Every executor needs traceduck importable from the
Python it runs (spark.pyspark.python or PYSPARK_PYTHON). The report's rows are written as CSV (one
file, DuckDB's order of rows); without --report, only the ingest is run. Prints one JSON line: the
runs ingested and skipped, and the seconds the ingest and the report took.
"""

from __future__ import annotations

import argparse
import csv
import json
import time

from pyspark.sql import SparkSession

from traceduck import spark as tds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", help="directories of traces or trace files")
    ap.add_argument("store", help="the store, on a path every worker sees")
    ap.add_argument("--report", help="a report to run after the ingest (traceduck reports lists them)")
    ap.add_argument("--param", action="append", default=[], help="KEY=VALUE, a parameter of the report")
    ap.add_argument("--out", help="CSV file for the report's rows (default: print them)")
    args = ap.parse_args()

    spark = SparkSession.builder.appName("traceduck-ingest").getOrCreate()
    t0 = time.perf_counter()
    results = tds.ingest(spark, args.traces, args.store)
    ingest_s = time.perf_counter() - t0
    out = {"runs": sum(1 for r in results if not r.skipped), "skipped": sum(1 for r in results if r.skipped),
           "ingest_s": round(ingest_s, 2)}
    if args.report:
        t0 = time.perf_counter()
        tds.register(spark, args.store)
        df = tds.report(spark, args.report, params=args.param)
        rows = df.collect()
        out["report_rows"] = len(rows)
        out["report_s"] = round(time.perf_counter() - t0, 2)
        if args.out:
            with open(args.out, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(df.columns)
                w.writerows(rows)
        else:
            for r in rows:
                print("\t".join("" if v is None else str(v) for v in r))
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()
