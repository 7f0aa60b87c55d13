"""Run the third-party corpus (issue 28) through gradlab.check at the defaults, in float64 and
float32, and print one line per config and dtype.

    python benchmarks/thirdparty/run_corpus.py                  # every config, both dtypes
    python benchmarks/thirdparty/run_corpus.py --only roma --dtype float64 --json out.json
    python benchmarks/thirdparty/run_corpus.py --known-bugs     # the Functions found broken

The packages live in $GRADLAB_THIRDPARTY (default ~/.cache/gradlab-thirdparty), outside the
repository; install.sh fills it when it is missing.  The configs come from configs_lead.py and
configs_independent.py (format: corpus.py), or from the files given with --configs.

Each line counts the call's rows by status (pass/fail/error/skip/warn) and lists every fail,
error and warn row (and "skip!" for a skip nobody declared, which gradlab counts as unverified):
check, variant, the row's dtype, hint, reason and max errors.  A float32
call also runs the float64 numerical checks (jacobian, second order, ...); the summary counts
such a row once.  A config that cannot be imported or set up, or that gradlab refuses, is a
harness error, not a gradlab failure.  Exit code: 1 when a row failed (fail, error, or a time
limit hit), else 2 when there was a harness error, else 0.  With --known-bugs the configs are
the KNOWN_BUGS lists and every one of them must fail: exit 0 when each did, 1 otherwise.
"""

from __future__ import annotations

import argparse
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
DEFAULT_FILES = (HERE / "configs_lead.py", HERE / "configs_independent.py")
DTYPES = ("float64", "float32")
#: gradlab.check's own default per call (gradlab.guard.DEFAULT_TIMEOUT_S): a hang is a verdict.
TIMEOUT_S = 300.0
#: row statuses gradlab counts as failed, and the ones this report lists row by row.
FAILED = ("fail", "error")
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


def load_configs(path: Path, attr: str) -> tuple[list[Any], str]:
    """(configs, "") from `path`'s list `attr`, or ([], the error) when it does not import."""
    try:
        spec = importlib.util.spec_from_file_location(f"corpus_{path.stem}", path)
        if spec is None or spec.loader is None:
            return [], f"{path.name}: not a Python file"
        module: ModuleType = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return list(getattr(module, attr, [])), ""
    except Exception as exc:  # a broken config file is the harness's error, reported
        return [], f"{path.name}: {type(exc).__name__}: {exc}"


@dataclass
class Outcome:
    """One config in one dtype: gradlab's rows, or the harness error that stopped it."""

    name: str
    package: str
    dtype: str
    seconds: float = 0.0
    rows: list[Any] = field(default_factory=list)
    harness_error: str = ""
    #: gradlab stopped the call at its time or memory limit (its rows end with an error row).
    limit: str = ""

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("pass", "fail", "error", "skip", "warn"), 0)
        for r in self.rows:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    @property
    def failed(self) -> bool:
        return bool(self.limit) or any(r.status in FAILED for r in self.rows)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "package": self.package, "dtype": self.dtype,
                "seconds": round(self.seconds, 3), "harness_error": self.harness_error,
                "limit": self.limit, "counts": self.counts(),
                "rows": [_row_summary(r) for r in self.rows]}


def _row_summary(r: Any) -> dict[str, Any]:
    return {"check": r.check, "variant": r.variant, "dtype": r.dtype, "status": r.status,
            "declared": r.declared, "hint": r.hint, "reason": r.reason,
            "max_abs_err": r.max_abs_err,
            "max_rel_err": r.max_rel_err, "note": r.note.splitlines()[0] if r.note else ""}


def package_name(package: str) -> str:
    """"POT==0.9.7.post1" -> "pot" (one package, whatever its pin or spelling)."""
    return package.split("==")[0].strip().lower().replace("_", "-")


def run_config(cfg: Any, dtypes: tuple[str, ...], timeout: float) -> list[Outcome]:
    """gradlab.check of one config in each dtype, at the defaults."""
    import gradlab

    outs = [Outcome(cfg.name, cfg.package, d) for d in dtypes]
    try:
        fn, args, kwargs = cfg.make()
    except Exception as exc:
        for o in outs:
            o.harness_error = f"set-up: {type(exc).__name__}: {exc}"
        return outs
    for o in outs:
        start = time.perf_counter()
        try:
            report = gradlab.check(fn, list(args), reference=cfg.reference, dtypes=[o.dtype],
                                   timeout=timeout, **dict(kwargs))
            o.rows = list(report.rows)
        except gradlab.CheckLimitError as exc:
            o.rows, o.limit = list(exc.report.rows), str(exc).splitlines()[0]
        except Exception as exc:  # gradlab refused the call (bad args) or crashed
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            o.harness_error = (f"gradlab.check raised {type(exc).__name__}: {exc} "
                               f"({Path(tb.filename).name}:{tb.lineno})")
        o.seconds = time.perf_counter() - start
    return outs


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2g}"


def render(o: Outcome) -> list[str]:
    head = f"{o.name}  [{o.dtype}]"
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


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """Totals over distinct rows: a float32 call's float64 rows count once with the float64
    call's (same config, row dtype, device, check and variant)."""
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
            "harness_errors": sum(1 for o in outcomes if o.harness_error),
            "failed_configs": sorted({o.name for o in outcomes if o.failed})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[],
                    help="run the configs whose name contains this (repeatable)")
    ap.add_argument("--dtype", action="append", choices=DTYPES,
                    help="float64 and/or float32 (default: both)")
    ap.add_argument("--json", type=Path, help="write every outcome and the summary here")
    ap.add_argument("--configs", type=Path, nargs="+", default=list(DEFAULT_FILES),
                    help="config files (default: configs_lead.py configs_independent.py)")
    ap.add_argument("--known-bugs", action="store_true",
                    help="run the files' KNOWN_BUGS instead; each must fail")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S,
                    help=f"seconds per gradlab.check call (default {TIMEOUT_S:g})")
    ap.add_argument("--no-install", action="store_true", help="never run install.sh")
    ns = ap.parse_args(argv)
    dtypes = tuple(ns.dtype or DTYPES)

    target = thirdparty_dir()
    install_error = "" if ns.no_install else ensure_installed(target)
    setup_path(target)
    import torch

    torch.set_num_threads(1)  # a shared machine; the corpus's tensors are tiny

    outcomes: list[Outcome] = []
    attr = "KNOWN_BUGS" if ns.known_bugs else "CONFIGS"
    for path in ns.configs:
        configs, error = load_configs(path, attr)
        if error:
            outcomes.append(Outcome(path.name, path.name, "-", harness_error=error))
            print(f"{path.name}  HARNESS ERROR  {error}", flush=True)
            continue
        for cfg in configs:
            if ns.only and not any(s in cfg.name for s in ns.only):
                continue
            for o in run_config(cfg, dtypes, ns.timeout):
                if install_error and o.harness_error:
                    o.harness_error += f" (and {install_error})"
                outcomes.append(o)
                print("\n".join(render(o)), flush=True)

    s = summarize(outcomes)
    print(f"{s['configs']} configs from {s['packages']} packages: {s['fail']} fail rows, "
          f"{s['warn']} warn rows ({s['error']} error rows, {s['undeclared_skips']} undeclared "
          f"skips, {s['limits']} limits hit, "
          f"{s['harness_errors']} harness errors)")
    if ns.json:
        ns.json.write_text(json.dumps({"summary": s, "outcomes": [o.as_dict() for o in outcomes]},
                                      indent=1, default=str))
    if ns.known_bugs:
        missed = sorted({o.name for o in outcomes if not o.failed and not o.harness_error})
        for name in missed:
            print(f"NOT CAUGHT: {name}")
        return 1 if missed or s["harness_errors"] else 0
    if s["fail"] or s["error"] or s["limits"]:
        return 1
    return 2 if s["harness_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
