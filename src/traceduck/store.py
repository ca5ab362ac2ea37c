"""The store: one directory of runs, each published by one atomic rename.

    STORE/runs/<run_id>/<table>.parquet   published runs
    STORE/tmp/<run_id>.<random>/          runs being written (never read)
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import xxhash

from .errors import StoreError

STORE_ENV = "TRACEDUCK_STORE"
DEFAULT_STORE = "traceduck.store"
RUN_ID_HEX = 12


def resolve_store(store: str | os.PathLike | None) -> Path:
    """`--store`, else $TRACEDUCK_STORE, else ./traceduck.store."""
    if store is None or str(store) == "":
        store = os.environ.get(STORE_ENV) or DEFAULT_STORE
    return Path(store).expanduser().absolute()


def content_run_id(path: Path, block: int = 8 << 20) -> str:
    """Run id: a fast hash of the file's bytes, so the same bytes give the same run."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while True:
            data = f.read(block)
            if not data:
                break
            h.update(data)
    return h.hexdigest()[:RUN_ID_HEX]


class Store:
    """A store directory."""

    def __init__(self, path: str | os.PathLike | None = None, create: bool = False) -> None:
        self.path = resolve_store(path)
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"store {self.path} is not a directory", "Pass --store with a directory")
        if create:
            try:
                (self.path / "runs").mkdir(parents=True, exist_ok=True)
                (self.path / "tmp").mkdir(exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create store {self.path} ({e.strerror})") from None

    @property
    def runs_dir(self) -> Path:
        return self.path / "runs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def has_run(self, run_id: str) -> bool:
        return (self.run_dir(run_id) / "runs.parquet").is_file()

    def run_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if (p / "runs.parquet").is_file())

    def table_glob(self, table: str) -> str:
        return str(self.runs_dir / "*" / f"{table}.parquet")

    def new_tmp_dir(self, run_id: str) -> Path:
        d = self.path / "tmp" / f"{run_id}.{uuid.uuid4().hex[:8]}"
        d.mkdir(parents=True)
        return d

    def publish(self, tmp: Path, run_id: str, replace: bool) -> bool:
        """Move a fully written run into place. False when the run exists and replace is off."""
        target = self.run_dir(run_id)
        if replace and target.exists():
            trash = self.path / "tmp" / f"{run_id}.replaced.{uuid.uuid4().hex[:8]}"
            os.rename(target, trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if target.exists():  # another process published the same content first
                shutil.rmtree(tmp, ignore_errors=True)
                return False
            raise
        return True

    def discard(self, tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    def size_bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.runs_dir):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return total
