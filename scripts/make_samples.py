"""Make the project's sample traces: samples/buggy.json.gz and samples/fixed.json.gz.

Needs torch (CPU build is enough): `pip install torch`, then `python scripts/make_samples.py`.
The traces are committed, so nothing else in traceduck needs torch.
"""

from __future__ import annotations

import gzip
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = Path(__file__).resolve().parent / "tinydecoder.py"


def scrub(text: str) -> str:
    """Keep the trace free of this machine: host name and absolute interpreter paths."""
    text = re.sub(r'"host_name": "[^"]*"', '"host_name": "sample-host"', text)
    for prefix in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, str(ROOT), str(Path.home())}, key=len,
                         reverse=True):
        text = text.replace(prefix.rstrip("/") + "/", "")
    host = socket.gethostname()
    if host:
        text = text.replace(host, "sample-host")
    return text


def main() -> None:
    namespace: dict = {"__name__": "tinydecoder"}
    exec(compile(MODEL.read_text(), "tinydecoder.py", "exec"), namespace)  # bare file name in stack frames
    out_dir = ROOT / "samples"
    out_dir.mkdir(exist_ok=True)
    for variant, fixed in (("buggy", False), ("fixed", True)):
        with tempfile.TemporaryDirectory() as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                namespace["make_trace"](fixed, f"{variant}.json")
                text = Path(f"{variant}.json").read_text()
            finally:
                os.chdir(cwd)
        data = scrub(text).encode()
        target = out_dir / f"{variant}.json.gz"
        with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(data)
        print(f"{target.relative_to(ROOT)}: {len(data):,} bytes of JSON, {target.stat().st_size:,} gzipped")


if __name__ == "__main__":
    main()
