"""`gradlab list` tells the truth at 80 columns (issue 23 item 9): the devices each bundled spec
declares and which of them this machine has, and a capability matrix whose lines fit the width
with no state cell wrapped, however long an op name is.  `gradlab list` is run as a user runs
it: the installed `gradlab` command, in a subprocess (once, shared by the tests that read it);
`gradlab check` runs in this process (conftest.run_cli), at the same 80 columns."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from rich.console import Console
from rich.table import Table

from gradlab import ops
from gradlab.cli.app import device_cell, devices_note
from gradlab.model import MATRIX
from gradlab.render.capabilities import HEADERS, SHORT, capability_table
from gradlab.results.capabilities import OpCapabilities, from_states
from gradlab.spec import load_file

GRADLAB = Path(sys.executable).parent / "gradlab"
LONG = "a_rather_long_user_function_name_Function_that_goes_on"


def gradlab(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """The installed command, at a terminal `columns` wide."""
    if not GRADLAB.exists():
        pytest.skip(f"no installed gradlab command beside {sys.executable}")
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run([str(GRADLAB), *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def rendered(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text().splitlines()


def states_line(lines: list[str], states: list[str]) -> bool:
    """Whether some line ends with exactly these states, in order."""
    return any(ln.split()[-len(states):] == states for ln in lines)


@pytest.fixture(scope="module")
def listing() -> str:
    proc = gradlab("list")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.xdist_group("listing")  # one pytest worker runs the one subprocess
def test_list_shows_the_devices_the_specs_declare(listing: str) -> None:
    declared = {t.op.name: t.devices or ("cpu",)
                for e in ops.BUNDLED for t in load_file(str(ops.spec_file(e.name)))}
    assert set(declared) == set(ops.names())
    for e in ops.BUNDLED:
        line = next(ln for ln in listing.splitlines() if ln.split()[:1] == [e.name])
        # every bundled spec declares cpu only, which every machine has: no cuda, no mark
        assert line.split()[1] == "/".join(declared[e.name]) == "cpu", line
    assert "cpu/cuda" not in listing
    assert "this machine has all of them" in " ".join(listing.split())


def test_a_declared_device_this_machine_lacks_is_marked() -> None:
    assert device_cell(("cpu", "cuda"), {"cpu"}) == "cpu/cuda*"
    assert device_cell(("cpu", "cuda"), {"cpu", "cuda"}) == "cpu/cuda"
    assert device_cell(("cuda",), set()) == "cuda*"
    note = devices_note({"cpu"}, {"cpu", "cuda"})
    assert "*: not on this machine" in note and "--skip-unavailable" in note
    assert "all of them" in devices_note({"cpu", "cuda"}, {"cpu", "cuda"})


@pytest.mark.xdist_group("listing")
def test_list_fits_80_columns_with_every_state_whole(listing: str) -> None:
    lines = listing.splitlines()
    assert max(len(ln.rstrip()) for ln in lines) <= 80
    for e in ops.BUNDLED:
        assert states_line([ln for ln in lines if ln.split()[:1] == [e.name]],
                           [e.capabilities[c] for c in MATRIX]), e.name
    # the short headers are explained
    assert "amp: autocast" in " ".join(listing.split())


def test_the_matrix_at_80_columns_with_a_long_op_name() -> None:
    matrix = [from_states(e.name, e.capabilities) for e in ops.BUNDLED] + [
        OpCapabilities(LONG, {})]
    lines = rendered(capability_table(matrix, 80, "capabilities"), 80)
    assert max(len(ln.rstrip()) for ln in lines) <= 80
    # the long name is whole on a line of its own; its states follow on the next line
    at = next(i for i, ln in enumerate(lines) if ln.strip() == LONG)
    assert lines[at + 1].split() == ["-"] * len(MATRIX)
    # every other op keeps one line: its name and all its states
    for e in ops.BUNDLED:
        assert any(ln.split() == [e.name, *(e.capabilities[c] for c in MATRIX)]
                   for ln in lines), e.name
    header = next(ln for ln in lines if ln.split()[:1] == ["op"])
    assert header.split()[1:] == [SHORT[c] for c in MATRIX]
    assert "cmp: compile" in " ".join(" ".join(lines).split())


def test_a_name_longer_than_the_width_folds_and_the_states_stay_whole() -> None:
    name = "x" * 100
    lines = rendered(capability_table([OpCapabilities(name, {})], 80), 80)
    assert max(len(ln.rstrip()) for ln in lines) <= 80
    assert "x" * 80 in lines and any(ln.strip() == "x" * 20 for ln in lines)
    assert states_line(lines, ["-"] * len(MATRIX))


def test_a_wide_terminal_keeps_the_full_headers() -> None:
    matrix = [from_states(e.name, e.capabilities) for e in ops.BUNDLED]
    lines = rendered(capability_table(matrix, 120), 120)
    header = next(ln for ln in lines if ln.split()[:1] == ["op"])
    assert header.split()[1:] == [HEADERS[c] for c in MATRIX]
    assert max(len(ln.rstrip()) for ln in lines) <= 120
    # no width: the full table whatever it takes
    full = capability_table(matrix)
    assert isinstance(full, Table)
    assert [c.header for c in full.columns][1:] == [HEADERS[c] for c in MATRIX]


def test_check_prints_the_matrix_of_a_long_named_op_in_80_columns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = importlib.import_module("gradlab.cli.app")  # the module, not gradlab.cli.app (Typer)

    tests = Path(__file__).parent
    for console in (app.out, app.err):  # made at import: an 80-column terminal from here on
        monkeypatch.setattr(console, "width", 80)
    code, stdout, stderr = run_cli(["check", str(tests / "data" / "narrow" / "long_name.yaml"),
                                    "--path", str(tests), "--no-variants", "--report-dir",
                                    str(tmp_path)], capsys)
    assert code == 0, stdout[-2000:] + stderr[-2000:]
    out = stdout.splitlines()
    start = next(i for i, ln in enumerate(out) if ln.strip() == "capabilities")
    end = next(i for i, ln in enumerate(out) if i > start and "requires:" in ln)
    lines = out[start:end + 1]
    assert max(len(ln.rstrip()) for ln in lines) <= 80
    at = next(i for i, ln in enumerate(lines) if ln.strip() == LONG)
    # every state of the op on the next line, one word each: none wrapped or cut
    assert len(lines[at + 1].split()) == len(MATRIX)
    assert set(lines[at + 1].split()) <= {"yes", "no", "-", "n/a", "wrong", "breaks"}


def test_list_and_help_import_no_pydantic() -> None:
    """`gradlab list` starts fast (issue 30 item 9): typer 0.29 coerces a help flag without a
    value through pydantic (half of list's time); gradlab.cli.main gives it False instead,
    and `--help` itself still prints the help."""
    code = ("import sys; from gradlab.cli import main; sys.argv = ['gradlab', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n"
            "    print('EXIT', exc.code, 'pydantic' in sys.modules)")
    for args, shown in ((["list"], "conv2d"), (["list", "--help"], "Usage:"),
                        (["--help"], "Usage:")):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, check=False)
        assert shown in proc.stdout, proc.stderr
        assert proc.stdout.rstrip().endswith("EXIT 0 False"), proc.stdout[-300:]
