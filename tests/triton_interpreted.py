"""The Triton checks run under TRITON_INTERPRET=1, for the whole suite in one subprocess.

triton reads TRITON_INTERPRET when it is imported, so the interpreted checks of
tests/ops/test_involution.py (run_triton_checks) and tests/test_triton_shapes.py (run_reduced)
run in a child process: this module, run as a script, loads both files there and runs both
check sets, printing one JSON line {set: {check name: "ok" | error}}.  One child imports torch
and triton once (about 1.2 s) where one per file did it twice.  Both files' interpreted tests are
in xdist group GROUP, so one pytest worker runs the child, and results() keeps what it printed
for the rest of that worker's session.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: The xdist group of every test that reads results().
GROUP = "triton_interpreter"
#: Each check set: the file that defines it and its function that runs it in this process.
SETS = {
    "involution": (TESTS / "ops" / "test_involution.py", "run_triton_checks"),
    "shapes": (TESTS / "test_triton_shapes.py", "run_reduced"),
}
#: The one child: torch + triton imports and some hundred small interpreted launches (about
#: 25 s on an idle 2-core machine).
SUBPROCESS_TIMEOUT_S = 600


def results(name: str) -> dict[str, str]:
    """Check name -> "ok" | error, for check set `name` (the child runs once per process)."""
    from torchguards import needs_triton_interpreter  # under pytest only (conftest's path)

    needs_triton_interpreter()  # a triton whose interpreter runs these kernels
    return _all_results()[name]


@functools.cache
def _all_results() -> dict[str, dict[str, str]]:
    import pytest

    from gradlab.ops.involution import FORCE_TRITON_ENV

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop(FORCE_TRITON_ENV, None)  # the involution checks force the Triton path themselves
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve())], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S,
                          check=False)
    if proc.returncode != 0:
        pytest.fail(f"interpreter subprocess exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    found: dict[str, dict[str, str]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def _run_set(path: Path, runner: str) -> dict[str, str]:
    """Load the test file at `path` as a module and run its check set."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    run: Callable[[], dict[str, str]] = getattr(module, runner)
    return run()


def _cached_lang_patching() -> None:
    """Make the interpreter's per-launch patching of triton.language cheaper, same effect.

    On every launch and every device-function call, triton's interpreter lists each language
    module's members (inspect.getmembers) to wrap its builtins: about a third of this child's
    time.  The builtins are the same each time, so they are listed once per module here; a
    member is wrapped only while it is still the builtin (not already wrapped), as listing
    the module would find.  Left as it is when the interpreter's internals differ."""
    import inspect

    try:
        from triton.runtime import interpreter as interp
        patch_attr, is_builtin = interp._patch_attr, interp.tl.core.is_builtin
    except (ImportError, AttributeError):
        return
    if (list(inspect.signature(interp._patch_builtin).parameters) != ["pkg", "builder", "scope"]
            or list(inspect.signature(patch_attr).parameters)
            != ["obj", "name", "member", "builder", "scope"]):
        return
    builtins: dict[int, list[tuple[str, object]]] = {}

    def patch_builtin(pkg: object, builder: object, scope: object) -> None:
        members = builtins.get(id(pkg))
        if members is None:
            members = builtins[id(pkg)] = [(n, m) for n, m in inspect.getmembers(pkg)
                                           if is_builtin(m)]
        for name, member in members:
            if getattr(pkg, name, None) is member:
                patch_attr(pkg, name, member, builder, scope)

    interp._patch_builtin = patch_builtin


def _no_overflow_sanitizer() -> None:
    """Switch off the interpreter's int32 overflow check of every integer add, sub and mul
    (about 45% of this child's time).  At these checks' sizes no index comes near 2^31; the
    offsets the kernels compute are checked against int32 for every real layer shape in plain
    Python (gradlab.kernels.involution_shapes, tests/test_triton_shapes.py)."""
    import dataclasses

    try:
        from triton.runtime import interpreter as interp
        builder = interp.interpreter_builder
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    except (ImportError, AttributeError, TypeError):
        return


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("set TRITON_INTERPRET=1 before running the interpreted Triton checks")
    _cached_lang_patching()
    _no_overflow_sanitizer()
    print(json.dumps({name: _run_set(*where) for name, where in SETS.items()}))
