"""gradlab record's start-up hook: every Python process of a recorded command runs this file.

`gradlab record` puts this folder first on PYTHONPATH; Python's `site` imports `sitecustomize`
at start-up, inherited by subprocesses (pytest-xdist workers, multiprocessing, `python -m`).
Active only while GRADLAB_RECORD_DIR is set.  It imports nothing heavy: a finder on
sys.meta_path waits for `import torch`, and once torch has finished importing, the recorder
(gradlab/record/hook.py and wrap.py, loaded by their paths from GRADLAB_RECORD_LIB, so another
interpreter than gradlab's can run them) wraps its calls.  The sitecustomize this one shadows,
if any, is imported after it.  A failure is written to the record folder, never raised into
the program.
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, path):
    """A module loaded from a file, under a private name."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def start():
    """The recorder installed, torch imported: failures written to raw/<pid>-error.txt."""
    folder = os.environ["GRADLAB_RECORD_DIR"]
    try:
        lib = os.environ["GRADLAB_RECORD_LIB"]
        hook = load("_gradlab_record_hook", os.path.join(lib, "hook.py"))
        wrap = load("_gradlab_record_wrap", os.path.join(lib, "wrap.py"))
        rec = hook.Recorder(folder, int(os.environ.get("GRADLAB_RECORD_MAX_SIGNATURES", "3")),
                            int(os.environ.get("GRADLAB_RECORD_MAX_BYTES", str(4 << 20))))
        wrap.install(rec)
    except Exception as exc:
        try:
            os.makedirs(os.path.join(folder, "raw"), exist_ok=True)
            with open(os.path.join(folder, "raw", f"{os.getpid()}-error.txt"), "a") as f:
                f.write(f"{type(exc).__name__}: {exc}\n")
        except OSError:
            pass


class TorchWatch:
    """A meta path finder that lets torch import as it would, then starts the recorder."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            del loader.exec_module  # the loader as it was
            start()

        loader.exec_module = exec_module
        return spec


def chain():
    """Import the sitecustomize this file shadows (a virtualenv's or a distribution's)."""
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if ours is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = ours


if os.environ.get("GRADLAB_RECORD_DIR"):
    if "torch" in sys.modules:
        start()
    else:
        sys.meta_path.insert(0, TorchWatch())
chain()
