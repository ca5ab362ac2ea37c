"""Bare streaming iteration with ijson (the memory-flat parse most tools use)."""

import sys

import ijson

with open(sys.argv[1], "rb") as f:
    for _ in ijson.items(f, "traceEvents.item"):
        pass
