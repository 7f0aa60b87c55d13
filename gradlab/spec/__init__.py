"""YAML op specs -> validated Targets.  Every error names the file and the key path.

A spec file holds one op (a mapping) or several under `ops:`.  See docs/specs.md for the format.
Modules: values (plain values, settings, key paths), tensors and tensorfile (tensor arguments,
fixed values inline or from a file), arguments (args, kwargs, cases and their `set`), document
(op mappings -> Targets), files (files, folders, bundled op names and their spec files), imports
(`package.module:attr`, from the spec's folder, --path, sys.path, the current directory), lookup
(a module or attribute certainly missing, found without importing).
"""

from __future__ import annotations

from gradlab.spec.files import (
    bundled_op,
    import_callables,
    load_bundled,
    load_file,
    look_up_callables,
    parse_document,
    resolve,
)
from gradlab.spec.imports import add_import_paths, as_callable, load_object

__all__ = ["add_import_paths", "as_callable", "bundled_op", "import_callables", "load_bundled",
           "load_file", "load_object", "look_up_callables", "parse_document", "resolve"]
