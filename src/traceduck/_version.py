"""traceduck's version: a leaf module, so that nothing needs the package's `__init__` to read it."""

__version__ = "0.1.0"
