"""YAML op specs -> validated Targets.  Every error names the file and the key path.

A spec file holds one op (a mapping) or several under `ops:`.  See docs/specs.md for the format.
Modules: values (tensors, args, cases, settings), document (op mappings -> Targets), files
(files, folders, bundled op names and their spec files), imports (`package.module:attr`).
"""

from __future__ import annotations

from gradlab.spec.files import (
    bundled_op,
    load_bundled,
    load_file,
    parse_document,
    resolve,
)
from gradlab.spec.imports import as_callable, load_object

__all__ = ["as_callable", "bundled_op", "load_bundled", "load_file", "load_object",
           "parse_document", "resolve"]
