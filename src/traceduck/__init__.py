"""traceduck: an embedded SQL database for PyTorch profiler (Kineto) Chrome traces."""

__version__ = "0.1.0"

from .api import Database, ingest, label, open, remove, rename  # noqa: E402
from .errors import InputError, QueryError, RunSelectionError, StoreError, TraceduckError  # noqa: E402

__all__ = ["Database", "ingest", "open", "label", "rename", "remove", "TraceduckError", "InputError", "StoreError", "RunSelectionError",
           "QueryError", "__version__"]
