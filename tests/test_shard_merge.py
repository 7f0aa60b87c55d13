"""--shard I/N splits a run's cases so the shards together are the whole run; `gradlab merge`
joins their JSON reports and exits as the unsharded run would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, TESTS
from typer.testing import CliRunner

from gradlab.cli import app
from gradlab.errors import GradlabError
from gradlab.model import Case, OpDef, Target
from gradlab.render.files import read_check_json
from gradlab.results import FAIL, PASS, CheckRow, Finding, Report, exit_code, merge_reports
from gradlab.select import matches, parse_shard, select, shard

runner = CliRunner()
#: Failing and passing user Functions plus a bundled op with two cases: 4 op/case keys.
WHAT = [str(DATA / "user_broken.yaml"), str(DATA / "user_ok.yaml"), "exp"]
KEY = ("op", "case", "dtype", "device", "variant", "check", "status")


def target(op: str, *cases: str) -> Target:
    return Target(op=OpDef(name=op, summary="", function=abs, reference=None,
                           second_order=None, cases=tuple(Case(c, ()) for c in cases)),
                  source="test")


def keys(targets: list[Target]) -> list[str]:
    return [f"{t.op.name}/{c.name}" for t in targets for c in t.op.cases]


def test_shards_partition_the_cases_whatever_the_order() -> None:
    targets = [target("b", "x", "y", "z"), target("a", "x"), target("c", "w", "v")]
    all_keys = sorted(keys(targets))
    for n in (1, 2, 3, 4, 7):
        parts = [keys(shard(targets, i, n)) for i in range(1, n + 1)]
        assert sorted(k for p in parts for k in p) == all_keys
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
        # the same split when the spec files come in another order
        assert [sorted(p) for p in parts] == [sorted(keys(shard(targets[::-1], i, n)))
                                              for i in range(1, n + 1)]
    assert shard(targets, 7, 7) == []  # more shards than cases: an empty shard


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "3", "1/2/3", ""])
def test_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(GradlabError, match="--shard"):
        parse_shard(text)


def test_k_patterns() -> None:
    assert matches("conv2d/groups_2", "groups") and matches("conv2d/groups_2", "CONV2D/")
    assert matches("conv2d/groups_2", "*/groups_?") and not matches("conv2d/groups_2", "groups*")
    targets = [target("conv2d", "basic", "groups_2"), target("linear", "basic")]
    assert keys(select(targets, ["basic"])) == ["conv2d/basic", "linear/basic"]
    assert keys(select(targets, ["linear/*", "*groups*"])) == ["conv2d/groups_2",
                                                               "linear/basic"]
    assert select(targets, []) == targets
    with pytest.raises(GradlabError, match="-k"):
        select(targets, ["nope"])


def run_check(tmp: Path, *extra: str) -> tuple[int, list[dict[str, Any]], Path]:
    out = tmp / "_".join(extra).replace("/", "of") if extra else tmp / "all"
    result = runner.invoke(app, ["check", *WHAT, "--report-dir", str(out), "-q", *extra])
    (path,) = out.glob("check-*.json")
    return result.exit_code, json.loads(path.read_text())["rows"], path


def test_union_of_shards_is_the_unsharded_run_and_merge_exits_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    code, rows, _ = run_check(tmp_path)
    shards = [run_check(tmp_path, "--shard", f"{i}/3") for i in (1, 2, 3)]
    union = sorted(tuple(r[k] for k in KEY) for _, rs, _ in shards for r in rs)
    assert union == sorted(tuple(r[k] for k in KEY) for r in rows)
    assert code == 1 and {c for c, _, _ in shards} <= {0, 1}
    # no case in two shards
    cases = [{(r["op"], r["case"]) for r in rs} for _, rs, _ in shards]
    assert sum(map(len, cases)) == len(set().union(*cases)) == 4

    merged = runner.invoke(app, ["merge", *(str(p) for _, _, p in shards), "--report-dir",
                                 str(tmp_path / "merged"), "--junit",
                                 str(tmp_path / "merged" / "j.xml"), "--summary-md",
                                 str(tmp_path / "merged" / "s.md")])
    assert merged.exit_code == code, merged.output
    (path,) = (tmp_path / "merged").glob("check-*.json")
    merged_rows = json.loads(path.read_text())["rows"]
    assert sorted(tuple(r[k] for k in KEY) for r in merged_rows) == union
    assert "SquareNoChainRule" in (tmp_path / "merged" / "s.md").read_text()
    assert (tmp_path / "merged" / "j.xml").exists()


def test_empty_shard_passes_and_merge_of_passing_shards_exits_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    ok = str(DATA / "user_ok.yaml")
    one = runner.invoke(app, ["check", ok, "--shard", "1/2", "--report-dir", str(tmp_path / "1")])
    two = runner.invoke(app, ["check", ok, "--shard", "2/2", "--report-dir", str(tmp_path / "2")])
    assert one.exit_code == 0, one.output
    assert two.exit_code == 0 and "PASSED" in two.output and "no case to run" in two.output
    paths = [str(next((tmp_path / d).glob("check-*.json"))) for d in ("1", "2")]
    assert runner.invoke(app, ["merge", *paths, "--report-dir", str(tmp_path / "m")]
                         ).exit_code == 0
    # the empty shard alone checked nothing: as a whole run, that fails
    assert runner.invoke(app, ["merge", paths[1], "--report-dir", str(tmp_path / "m")]
                         ).exit_code == 1


def test_merge_rejects_what_is_not_a_check_report(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"format": "gradlab-bench", "rows": []}))
    for path in (bench, tmp_path / "missing.json"):
        result = runner.invoke(app, ["merge", str(path)])
        assert result.exit_code == 2 and "gradlab: error:" in result.output


def test_check_json_reads_back_to_the_same_rows(tmp_path: Path) -> None:
    from gradlab.render.files import write_check_reports
    from gradlab.results import Element, ErrorStats

    f = Finding("input", 1, "transposed", shape=(3, 3), dims=(0, 1),
                stats=ErrorStats(1.0, 2.0, 0.5, 0.9, 1.1),
                worst=[Element(1.0, 2.0, input=1, input_index=(0, 2))])
    rows = [CheckRow("op", "c", "float32", "cpu", "base", "gradient", FAIL, hint="transposed",
                     findings=[f]),
            CheckRow("op", "c", "float32", "cpu", "base", "forward", PASS)]
    _, path, _ = write_check_reports(Report(rows=rows, env={"seed": 0}, stopped=True), tmp_path)
    back = read_check_json(path)
    assert back.rows == rows and back.env == {"seed": 0} and back.stopped


def test_exit_code_and_merge_reports() -> None:
    fail = Report(rows=[CheckRow("o", "c", "float64", "cpu", "base", "forward", FAIL)])
    ok = Report(rows=[CheckRow("o", "d", "float64", "cpu", "base", "forward", PASS)])
    empty = Report()
    assert int(exit_code(merge_reports([ok, empty]))) == 0
    assert int(exit_code(merge_reports([ok, fail]))) == 1
    assert int(exit_code(empty)) == 1 and int(exit_code(empty, empty_ok=True)) == 0
    assert int(exit_code(Report(truncated=True), empty_ok=True)) == 1
