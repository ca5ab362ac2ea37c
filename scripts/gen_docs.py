"""Write the reference docs (docs/reference/*.md) from the code; `--check` only says whether they are stale.

    python scripts/gen_docs.py            # regenerate docs/reference/
    python scripts/gen_docs.py --check    # exit 1, listing the stale files, when they differ
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # document this checkout, whatever traceduck is installed

from traceduck.refdocs import GENERATOR, stale_files, write  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "reference"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory [default: docs/reference]")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    shown = out.relative_to(ROOT).as_posix() if out.is_relative_to(ROOT) else str(out)
    if args.check:
        stale = stale_files(out)
        if stale:
            print(f"{shown} is stale ({', '.join(stale)}): run {GENERATOR}", file=sys.stderr)
            return 1
        return 0
    changed = write(out)
    print(f"{shown}: {', '.join(changed)} updated" if changed else f"{shown}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
