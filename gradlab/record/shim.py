"""What a recorded spec folder's `gradlab_recorded_*.py` modules call: a script's or a
checkout's definitions exposed under an importable name.

- `script`: the script's source run in the shim's own namespace, so its `if __name__ ==
  "__main__":` block does not run and what it defines has the shim's importable name (a worker
  process imports it again by that name); its folder goes first on sys.path, as Python puts it
  for a script.
- `module`: the module's import root put on sys.path, the module imported by its own name.
- `path`: a module whose name does not match its file's place (pytest's importmode=importlib):
  loaded from its file under its recorded name.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any


def on_path(folder: str) -> None:
    if folder not in sys.path:
        sys.path.insert(0, folder)
        importlib.invalidate_caches()


def by_path(module: str, file: str) -> Any:
    """`file` imported as `module` (kept in sys.modules under that name)."""
    if module in sys.modules:
        return sys.modules[module]
    spec = importlib.util.spec_from_file_location(module, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file} as {module}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod


def expose(namespace: dict[str, Any], how: str, module: str, file: str,
           root: str | None) -> None:
    """Fill a shim module's `namespace` with what `file` defines (see the module docstring)."""
    if how == "script":
        on_path(str(Path(file).parent))
        code = compile(Path(file).read_bytes(), file, "exec")
        namespace["__file__"] = file
        exec(code, namespace)  # the shim's __name__: the script's main block stays off
        return
    if how == "module" and root is not None:
        on_path(root)
        mod = importlib.import_module(module)
    else:
        mod = by_path(module, file)
    namespace.update({k: v for k, v in vars(mod).items() if not k.startswith("__")})
