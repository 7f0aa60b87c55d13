"""Run the third-party corpus (issue 28) through gradlab.check at the defaults, in float64 and
float32, and print one line per config and dtype.

    python benchmarks/thirdparty/run_corpus.py                  # every config, both dtypes
    python benchmarks/thirdparty/run_corpus.py --only roma --dtype float64 --json out.json
    python benchmarks/thirdparty/run_corpus.py --bugs-only      # the Functions found broken

The packages live in $GRADLAB_THIRDPARTY (default ~/.cache/gradlab-thirdparty), outside the
repository; install.sh fills it when it is missing.  The configs come from configs_lead.py,
configs_independent.py and configs_bugs.py (format: corpus.py), or from the files given with
--configs: each file's CONFIGS are correct Functions, which should give no fail row; its BUGS
are Functions with a real bug (each shown without gradlab in demos/), which gradlab must fail.

Each line counts the call's rows by status (pass/fail/error/skip/warn) and lists every fail,
error and warn row (and "skip!" for a skip nobody declared, which gradlab counts as unverified):
check, variant, the row's dtype, hint, reason and max errors.  A float32
call also runs the float64 numerical checks (jacobian, second order, ...); the summary counts
such a row once.  A config that cannot be imported or set up, or that gradlab refuses, is a
harness error, not a gradlab failure.  A bug is "caught" when a call of it has a fail or error
row on a check that sees it (its config's `seen_by`; any check when it names none), not counting
the error row of a limit; "limit" when instead a limit stopped it (gradlab's time or memory
limit, or this harness killing a child that outlived them): a limit is never a catch; "missed"
otherwise.  Exit code: 1 when a correct config has a failed row (fail, error, or a limit hit) or
a bug is missed or stopped by a limit, else 2 when there was a harness error, else 0.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_FILES = (HERE / "configs_lead.py", HERE / "configs_independent.py",
                 HERE / "configs_bugs.py")
DTYPES = ("float64", "float32")
#: gradlab.check's own default per call (gradlab.guard.DEFAULT_TIMEOUT_S): a hang is a verdict.
TIMEOUT_S = 300.0
#: seconds a child running one BUGS config gets past gradlab's limits before it is killed.
HARD_TIMEOUT_S = 60.0
#: row statuses gradlab counts as failed, and the ones this report lists row by row.
FAILED = ("fail", "error")
#: the reasons of the error row gradlab adds where a limit stopped a call: no catch.
LIMIT_REASONS = ("time_limit", "memory_limit")
LISTED = ("fail", "error", "warn")


def thirdparty_dir() -> Path:
    return Path(os.environ.get("GRADLAB_THIRDPARTY",
                               Path.home() / ".cache" / "gradlab-thirdparty"))


def ensure_installed(target: Path) -> str:
    """Run install.sh when `target` is missing or empty; "" when done, else why not."""
    if target.is_dir() and any(target.iterdir()):
        return ""
    proc = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True,
                          env={**os.environ, "GRADLAB_THIRDPARTY": str(target)}, check=False)
    if proc.returncode != 0:
        return f"install.sh exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
    return ""


def setup_path(target: Path) -> None:
    """The packages, this folder (corpus.py, the config files) and this checkout's gradlab."""
    for p in (str(ROOT), str(HERE), str(target)):
        if p not in sys.path:
            sys.path.insert(0, p)


def load_configs(path: Path) -> tuple[list[Any], list[Any], str]:
    """(CONFIGS, BUGS, "") of `path`, or ([], [], the error) when it does not import."""
    if str(HERE) not in sys.path:  # corpus.py, and the config files importing each other
        sys.path.insert(0, str(HERE))
    try:
        spec = importlib.util.spec_from_file_location(f"corpus_{path.stem}", path)
        if spec is None or spec.loader is None:
            return [], [], f"{path.name}: not a Python file"
        module: ModuleType = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return list(getattr(module, "CONFIGS", [])), list(getattr(module, "BUGS", [])), ""
    except Exception as exc:  # a broken config file is the harness's error, reported
        return [], [], f"{path.name}: {type(exc).__name__}: {exc}"


@dataclass
class Outcome:
    """One config in one dtype: gradlab's rows, or the harness error that stopped it."""

    name: str
    package: str
    dtype: str
    #: a BUGS config: gradlab must fail it.
    bug: bool = False
    seconds: float = 0.0
    rows: list[Any] = field(default_factory=list)
    harness_error: str = ""
    #: gradlab stopped the call at its time or memory limit (its rows end with an error row),
    #: or the harness killed the child running it.
    limit: str = ""
    #: a BUGS config's checks that see its bug (Config.seen_by; empty: any check).
    seen_by: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("pass", "fail", "error", "skip", "warn"), 0)
        for r in self.rows:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    @property
    def failed(self) -> bool:
        return bool(self.limit) or any(r.status in FAILED for r in self.rows)

    @property
    def caught(self) -> bool:
        """A fail or error row on a check that sees the bug (a limit's error row is none)."""
        return any(r.status in FAILED and r.reason not in LIMIT_REASONS
                   and (not self.seen_by or r.check in self.seen_by) for r in self.rows)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "package": self.package, "dtype": self.dtype, "bug": self.bug,
                "seen_by": list(self.seen_by), "seconds": round(self.seconds, 3), "harness_error": self.harness_error,
                "limit": self.limit, "counts": self.counts(),
                "rows": [_row_summary(r) for r in self.rows]}


def _row_summary(r: Any) -> dict[str, Any]:
    return {"check": r.check, "variant": r.variant, "dtype": r.dtype, "device": r.device,
            "status": r.status, "declared": r.declared, "unverified": r.unverified,
            "hint": r.hint, "reason": r.reason,
            "max_abs_err": r.max_abs_err,
            "max_rel_err": r.max_rel_err, "note": r.note.splitlines()[0] if r.note else ""}


@dataclass
class RowView:
    """A row read back from a child's JSON (the fields this report uses)."""

    check: str
    variant: str
    dtype: str
    device: str
    status: str
    declared: bool
    unverified: bool
    hint: str
    reason: str
    max_abs_err: float | None
    max_rel_err: float | None
    note: str


def run_isolated(path: Path, cfg: Any, dtypes: tuple[str, ...], timeout: float,
                 bug: bool) -> list[Outcome]:
    """run_config in a child process, killed after HARD_TIMEOUT_S past gradlab's own limits:
    a backward that never returns (torchinterp1d's recursion) is out of gradlab's reach, as it
    blocks inside the autograd engine and spawns threads without end."""
    import tempfile

    hard = len(dtypes) * (timeout + 30) + HARD_TIMEOUT_S
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "child.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--configs", str(path),
               "--name", cfg.name, "--bugs-only", "--timeout", str(timeout), "--no-install",
               "--json", str(out),
               *(f"--dtype={d}" for d in dtypes)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=hard)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            return [Outcome(cfg.name, cfg.package, d, bug=bug, seconds=hard,
                            seen_by=seen_by(cfg),
                            limit=f"hung: the child did not return in {hard:g} s and was killed")
                    for d in dtypes]
        if not out.exists():
            return [Outcome(cfg.name, cfg.package, d, bug=bug,
                            harness_error=f"child exited {proc.returncode}: {err.strip()[-300:]}")
                    for d in dtypes]
        data = json.loads(out.read_text())["outcomes"]
    return [Outcome(o["name"], o["package"], o["dtype"], bug=bug, seconds=o["seconds"],
                    rows=[RowView(**r) for r in o["rows"]], harness_error=o["harness_error"],
                    limit=o["limit"], seen_by=tuple(o["seen_by"])) for o in data]


def seen_by(cfg: Any) -> tuple[str, ...]:
    """The checks a config says see its bug (Config.seen_by), () when it says none."""
    return tuple(getattr(cfg, "seen_by", ()))


def package_name(package: str) -> str:
    """"POT==0.9.7.post1" -> "pot" (one package, whatever its pin or spelling)."""
    return package.split("==")[0].strip().lower().replace("_", "-")


def run_config(cfg: Any, dtypes: tuple[str, ...], timeout: float,
               bug: bool = False) -> list[Outcome]:
    """gradlab.check of one config in each dtype, at the defaults."""
    import gradlab

    outs = [Outcome(cfg.name, cfg.package, d, bug=bug, seen_by=seen_by(cfg)) for d in dtypes]
    try:
        fn, args, kwargs = cfg.make()
    except Exception as exc:
        for o in outs:
            o.harness_error = f"set-up: {type(exc).__name__}: {exc}"
        return outs
    for o in outs:
        start = time.perf_counter()
        try:
            report = checked(gradlab, cfg, fn, args, kwargs, o.dtype, timeout)
            o.rows = list(report.rows)
        except gradlab.CheckLimitError as exc:
            o.rows, o.limit = list(exc.report.rows), str(exc).splitlines()[0]
        except Exception as exc:  # gradlab refused the call (bad args) or crashed
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            o.harness_error = (f"gradlab.check raised {type(exc).__name__}: {exc} "
                               f"({Path(tb.filename).name}:{tb.lineno})")
        o.seconds = time.perf_counter() - start
    return outs


def checked(gradlab: Any, cfg: Any, fn: Any, args: Any, kwargs: Any, dtype: str,
            timeout: float) -> Any:
    """gradlab.check of one config in a worker process (isolate=True: its timeout then stops
    even a backward stuck in C, keeping the rows made before), in this process where the
    config's callables cannot be pickled."""
    kw = {"reference": cfg.reference, "dtypes": [dtype], "timeout": timeout, **dict(kwargs)}
    if not all(importable(f) for f in (fn, cfg.reference)):
        return gradlab.check(fn, list(args), **kw)
    try:
        return gradlab.check(fn, list(args), isolate=True, **kw)
    except ValueError as exc:
        if not str(exc).startswith("isolate=True"):
            raise
        return gradlab.check(fn, list(args), **kw)


def importable(obj: Any) -> bool:
    """Whether a worker can import `obj`'s module by its name (a config file loaded from its
    path, as load_configs does, is not)."""
    name = getattr(obj, "__module__", None)
    if not name or name == "__main__":
        return False
    # on sys.path, not only in sys.modules (where load_configs registers a file it loaded)
    return importlib.machinery.PathFinder.find_spec(name.split(".")[0], sys.path) is not None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2g}"


def render(o: Outcome) -> list[str]:
    head = f"{'BUG ' if o.bug else ''}{o.name}  [{o.dtype}]"
    if o.harness_error:
        return [f"{head}  HARNESS ERROR  {o.harness_error}"]
    c = o.counts()
    line = (f"{head}  pass {c['pass']} fail {c['fail']} error {c['error']} skip {c['skip']} "
            f"warn {c['warn']}  ({o.seconds:.1f} s)")
    lines = [line + (f"  LIMIT: {o.limit}" if o.limit else "")]
    for r in o.rows:
        if r.status in LISTED or r.unverified:  # an undeclared skip fails gradlab's verdict
            note = r.note.splitlines()[0][:90] if r.note else ""
            status = "skip!" if r.unverified else r.status
            lines.append(f"    {status:5s} {r.check}/{r.variant} ({r.dtype})  hint={r.hint or '-'}"
                         f"  reason={r.reason or '-'}  max_abs={_fmt(r.max_abs_err)}"
                         f"  max_rel={_fmt(r.max_rel_err)}" + (f"  [{note}]" if note else ""))
    return lines


def summarize(all_outcomes: list[Outcome]) -> dict[str, Any]:
    """Totals over the correct configs' distinct rows (a float32 call's float64 rows count once
    with the float64 call's: same config, row dtype, device, check and variant), and which bugs
    were caught."""
    outcomes = [o for o in all_outcomes if not o.bug]
    bugs: dict[str, bool] = {}
    limited: set[str] = set()
    for o in all_outcomes:
        if o.bug and not o.harness_error:
            bugs[o.name] = bugs.get(o.name, False) or o.caught
            if o.limit:
                limited.add(o.name)
    seen: dict[tuple[str, ...], str] = {}
    for o in outcomes:
        for r in o.rows:
            seen.setdefault((o.name, r.dtype, r.device, r.check, r.variant),
                            "skip!" if r.unverified else r.status)
    statuses = list(seen.values())
    names = {o.name for o in outcomes}
    return {"configs": len(names), "packages": len({package_name(o.package) for o in outcomes}),
            "fail": statuses.count("fail"), "error": statuses.count("error"),
            "warn": statuses.count("warn"), "undeclared_skips": statuses.count("skip!"),
            "limits": sum(1 for o in outcomes if o.limit),
            "harness_errors": sum(1 for o in all_outcomes if o.harness_error),
            "failed_configs": sorted({o.name for o in outcomes if o.failed}),
            "bugs_caught": sorted(n for n, c in bugs.items() if c),
            "bugs_limit": sorted(n for n, c in bugs.items() if not c and n in limited),
            "bugs_missed": sorted(n for n, c in bugs.items() if not c and n not in limited)}


def markdown(outcomes: list[Outcome]) -> str:
    """Every fail, error, warn and undeclared-skip row as a Markdown table (RESULTS-*.md)."""
    lines = ["| config | call | row | status | hint | max abs | max rel | note |",
             "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        call = f"{'BUG ' if o.bug else ''}{o.dtype}"
        if o.harness_error or o.limit:
            what = "harness error" if o.harness_error else "limit"
            lines.append(f"| {o.name} | {call} | - | {what} | - | - | - | "
                         f"{(o.harness_error or o.limit)[:120]} |")
        for r in o.rows:
            if r.status in LISTED or r.unverified:
                note = (r.note.splitlines()[0][:80] if r.note else r.reason).replace("|", "/")
                status = "skip!" if r.unverified else r.status
                lines.append(f"| {o.name} | {call} | {r.check}/{r.variant} ({r.dtype}) | "
                             f"{status} | {r.hint or '-'} | {_fmt(r.max_abs_err)} | "
                             f"{_fmt(r.max_rel_err)} | {note} |")
    return "\n".join(lines) + "\n"


def write_json(path: Path, outcomes: list[Outcome]) -> None:
    """Every outcome so far and their summary."""
    path.write_text(json.dumps({"summary": summarize(outcomes),
                                "outcomes": [o.as_dict() for o in outcomes]},
                               indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[],
                    help="run the configs whose name contains this (repeatable)")
    ap.add_argument("--dtype", action="append", choices=DTYPES,
                    help="float64 and/or float32 (default: both)")
    ap.add_argument("--json", type=Path, help="write every outcome and the summary here")
    ap.add_argument("--markdown", type=Path, help="write the listed rows as a Markdown table")
    ap.add_argument("--configs", type=Path, nargs="+", default=list(DEFAULT_FILES),
                    help="config files (default: configs_lead.py configs_independent.py)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--bugs-only", action="store_true", help="run the files' BUGS only")
    group.add_argument("--no-bugs", action="store_true", help="run the files' CONFIGS only")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S,
                    help=f"seconds per gradlab.check call (default {TIMEOUT_S:g})")
    ap.add_argument("--no-install", action="store_true", help="never run install.sh")
    ap.add_argument("--name", help=argparse.SUPPRESS)  # one config, by its exact name (a child)
    ns = ap.parse_args(argv)
    dtypes = tuple(ns.dtype or DTYPES)

    target = thirdparty_dir()
    install_error = "" if ns.no_install else ensure_installed(target)
    setup_path(target)
    import torch

    torch.set_num_threads(1)  # a shared machine; the corpus's tensors are tiny

    outcomes: list[Outcome] = []
    for path in ns.configs:
        configs, bugs, error = load_configs(path)
        if error:
            outcomes.append(Outcome(path.name, path.name, "-", harness_error=error))
            print(f"{path.name}  HARNESS ERROR  {error}", flush=True)
            continue
        todo = [(c, False) for c in ([] if ns.bugs_only else configs)]
        todo += [(c, True) for c in ([] if ns.no_bugs else bugs)]
        for cfg, bug in todo:
            if ns.only and not any(s in cfg.name for s in ns.only):
                continue
            if ns.name is not None and cfg.name != ns.name:
                continue
            # a bug may hang past gradlab's reach: each runs in a child process of its own
            isolate = bug and ns.name is None
            for o in (run_isolated(path, cfg, dtypes, ns.timeout, bug) if isolate
                      else run_config(cfg, dtypes, ns.timeout, bug)):
                if install_error and o.harness_error:
                    o.harness_error += f" (and {install_error})"
                outcomes.append(o)
                print("\n".join(render(o)), flush=True)
            if ns.json:  # after every config: a Function that kills the process (a heap
                # corrupted by indices past a sparse shape) loses none of the rows before it
                write_json(ns.json, outcomes)

    s = summarize(outcomes)
    print(f"{s['configs']} configs from {s['packages']} packages: {s['fail']} fail rows, "
          f"{s['warn']} warn rows ({s['error']} error rows, {s['undeclared_skips']} undeclared "
          f"skips, {s['limits']} limits hit, "
          f"{s['harness_errors']} harness errors)")
    n_bugs = len(s["bugs_caught"]) + len(s["bugs_limit"]) + len(s["bugs_missed"])
    if n_bugs:
        print(f"bugs: {len(s['bugs_caught'])} of {n_bugs} caught, {len(s['bugs_limit'])} "
              "stopped by a limit (not a catch)"
              + "".join(f"\n  limit: {name}" for name in s["bugs_limit"])
              + "".join(f"\n  missed: {name}" for name in s["bugs_missed"]))
    if ns.markdown:
        ns.markdown.write_text(markdown(outcomes))
    if ns.json:
        write_json(ns.json, outcomes)
    code = 1 if (s["fail"] or s["error"] or s["limits"] or s["bugs_missed"]
                 or s["bugs_limit"]) else (
        2 if s["harness_errors"] else 0)
    if ns.name is not None and any(o.limit for o in outcomes):
        # a child whose Function hung: its runaway backward threads would keep it alive
        sys.stdout.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
