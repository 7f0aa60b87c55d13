"""gradlab's version (its own module, so that any module can read it without a cycle)."""

__version__ = "0.1.0"
