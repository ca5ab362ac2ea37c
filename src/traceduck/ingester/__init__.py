"""The ingester: traces: reading, converting, nesting and publishing runs."""

from .pipeline import IngestResult, default_jobs, ingest_file

__all__ = ["IngestResult", "default_jobs", "ingest_file"]
