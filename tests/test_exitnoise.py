"""No nanobind leak report at the exit of a process that loaded Triton (issue 30, item 1):
libtriton's nanobind teardown prints it to stderr while the interpreter finalizes, after the
atexit handlers, as an object finalized then would (the stand-in here: a __del__ writing to
file descriptor 2, with a stand-in module under libtriton's name; importing Triton costs
seconds, and whether its teardown reports leaks depends on what the process compiled)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

PROGRAM = """
import os, sys, types
from gradlab.exitnoise import LIBTRITON, quiet_triton_exit
quiet_triton_exit()
quiet_triton_exit()  # registered once
if {loaded}:
    sys.modules[LIBTRITON] = types.ModuleType(LIBTRITON)

class Teardown:
    def __del__(self):
        os.write(2, b"nanobind: leaked 513 functions!\\n")

sys.modules["teardown_stand_in"] = Teardown()
sys.stderr.write("the run's own message\\n")
"""


@pytest.mark.parametrize("loaded", [True, False])
def test_exit_noise_is_silenced_only_after_triton(loaded: bool) -> None:
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(loaded=loaded)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "the run's own message" in proc.stderr
    assert ("nanobind: leaked" in proc.stderr) is not loaded, proc.stderr

