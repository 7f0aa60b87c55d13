"""Report files and bench files read back: names that never collide, atomic writes, a report folder
checked up front, long names made safe, and malformed bench JSON as one line with exit 2."""

import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import DATA, TESTS, run_cli

from gradlab import fileio
from gradlab.errors import ReportError
from gradlab.render import benchfile
from gradlab.render.benchfile import read_bench_json, write_bench_reports
from gradlab.render.files import write_check_reports
from gradlab.repro import repro_path
from gradlab.results import PASS, CheckRow, Report
from gradlab.results.bench import BenchError, BenchReport, BenchRow

WRITERS = 20


def small_report(marker: str) -> Report:
    return Report(rows=[CheckRow("op", marker, "float64", "cpu", "base", "forward", PASS)],
                  env={"marker": marker})


def test_concurrent_writers_in_the_same_second_get_distinct_complete_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every writer sees the same time and, on its first try, the same random suffix: all but
    # one must find the name taken (O_EXCL) and draw again
    monkeypatch.setattr(fileio, "timestamp", lambda: "20261123-113214")
    counter, lock = itertools.count(), threading.Lock()

    def token() -> str:
        with lock:
            n = next(counter)
        return "a1b2" if n < WRITERS else f"{n:04x}"

    monkeypatch.setattr(fileio, "token", token)
    barrier = threading.Barrier(WRITERS)
    results: dict[str, list[Path]] = {}
    errors: list[BaseException] = []

    def write(marker: str) -> None:
        try:
            barrier.wait()
            results[marker] = write_check_reports(small_report(marker), tmp_path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 3 * WRITERS, files  # no temp files or probes left behind
    for marker, (csv, js, env) in results.items():
        assert csv.stem == js.stem and csv.name.startswith("check-20261123-113214-")
        assert list(pd.read_csv(csv)["case"]) == [marker]
        # the environment once per report: in the JSON and the CSV beside it, not per row
        assert json.loads(js.read_text())["env"] == {"marker": marker}
        assert env.name == f"env-{csv.name}" and "marker" not in pd.read_csv(csv).columns
        assert pd.read_csv(env).to_dict("records") == [{"marker": marker}]
    assert len({csv for csv, _, _ in results.values()}) == WRITERS


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    fileio.atomic_write(path, "old")

    def broken(f: Any) -> None:
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        fileio.atomic_write_with(path, broken)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_safe_names_are_short_tame_and_distinct() -> None:
    long_a, long_b = "op" * 150, "op" * 149 + "oq"
    for name in (long_a, "a/b c", "../../etc", "x" * 300):
        safe = fileio.safe_name(name)
        assert len(safe) <= fileio.MAX_NAME_PART and "/" not in safe and not safe.startswith(".")
    assert fileio.safe_name(long_a) != fileio.safe_name(long_b)
    assert fileio.safe_name("a/b") != fileio.safe_name("a:b")
    assert fileio.safe_name("groups_2") == "groups_2"  # plain names stay as they are
    assert len(repro_path("r", long_a, long_b, "float64", "cpu").name) < 255


def test_a_300_character_op_name_writes_its_repro_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    monkeypatch.chdir(TESTS)
    spec = tmp_path / "long.yaml"
    spec.write_text((DATA / "user_broken.yaml").read_text() + f"name: {'n' * 300}\n")
    code, out, err = run_cli(["check", str(spec), "--report-dir", str(tmp_path / "r"),
                              "--no-variants", "--check", "gradient", "--dtype", "float64"],
                             capsys)
    assert code == 1, (out, err)
    (saved,) = (tmp_path / "r" / "repro").glob("*.pt")
    assert len(saved.name) < 255


def test_unwritable_report_folder_raises_naming_it(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for folder in (afile, afile / "sub"):
        with pytest.raises(ReportError, match=f"^{folder}: cannot create the report folder"):
            fileio.ensure_writable(folder)
    assert fileio.ensure_writable(tmp_path / "new" / "deeper").is_dir()
    assert not list((tmp_path / "new" / "deeper").iterdir())  # the probe is gone


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_report_folder_exits_2_before_any_check(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    code, out, err = run_cli(["check", "exp", "--report-dir", str(folder)], capsys)
    assert code == 2
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert lines == [f"gradlab: error: --report-dir: {folder}: the report folder is not "
                     "writable: Permission denied"]


@pytest.mark.parametrize("command", ["check", "bench"])
def test_unwritable_report_folder_exits_2_with_one_line(command: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    # what a read-only folder does to the probe, also where tests run as root
    monkeypatch.setattr(fileio.tempfile, "mkstemp", refuse)
    code, out, err = run_cli([command, "exp", "--report-dir", str(tmp_path)], capsys)
    assert code == 2, (out, err)
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert lines == [f"gradlab: error: --report-dir: {tmp_path}: the report folder is not "
                     "writable: Permission denied"]


# -- bench files read back --------------------------------------------------------------------


def bench_json(folder: Path) -> Path:
    rows = [BenchRow("exp", "small", "float32", "cpu", impl, "forward", median_s=1.0, n=3,
                     samples_s=[1.0, 1.1, 0.9]) for impl in ("custom", "reference")]
    return write_bench_reports(BenchReport(rows=rows, env={"torch_version": "x"}), folder)[1]


def edit(key: str, value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        *path, last = key.split(".")
        for part in path:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return change


MALFORMED = {
    "settings_text": (edit("settings", "abc"), "settings: expected a mapping, got 'abc'"),
    "env_list": (edit("env", [1, 2]), "env: expected a mapping, got [1, 2]"),
    "op_list": (edit("rows.0.op", ["a"]), "rows[0].op: expected a string, got ['a']"),
    "median_text": (edit("rows.1.median_s", "fast"),
                    "rows[1].median_s: expected a number or null, got 'fast'"),
    "samples_text": (edit("rows.1.samples_s", "1,2"), "rows[1].samples_s: expected a list"),
    "sample_nan": (edit("rows.0.samples_s.1", float("nan")), "rows[0].samples_s[1]: expected"),
    "n_float": (edit("rows.0.n", 2.5), "rows[0].n: expected an integer, got 2.5"),
    "rows_mapping": (edit("rows", {}), "rows: expected a list, got {}"),
    "interrupted_text": (edit("interrupted", "no"), "interrupted: expected true or false"),
    "version_bool": (edit("version", True), "version: bench file version True"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_bench_file_is_one_line_naming_file_and_key(name: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    change, expected = MALFORMED[name]
    good = bench_json(tmp_path / "good")
    doc = json.loads(good.read_text())
    change(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(BenchError) as info:
        read_bench_json(bad)
    assert str(info.value).startswith(f"{bad}: ") and expected in str(info.value), info.value
    code, out, err = run_cli(["compare", str(good), str(bad)], capsys)
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in out + err, (out, err)


def test_bench_file_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = bench_json(tmp_path)
    monkeypatch.setattr(benchfile, "MAX_BENCH_BYTES", 100)
    with pytest.raises(BenchError, match=r"more than the 100 B limit"):
        read_bench_json(good)
    monkeypatch.undo()
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BenchError, match="nested too deeply"):
        read_bench_json(deep)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(BenchError, match="not a regular file"):
        read_bench_json(fifo)
    truncated = tmp_path / "truncated.json"
    truncated.write_text(good.read_text()[:200])
    with pytest.raises(BenchError, match="not JSON"):
        read_bench_json(truncated)
    many = json.loads(good.read_text())
    many["rows"][0]["samples_s"] = [1.0] * 10_001
    (tmp_path / "many.json").write_text(json.dumps(many))
    with pytest.raises(BenchError, match=r"rows\[0\].samples_s: 10,001 samples"):
        read_bench_json(tmp_path / "many.json")
