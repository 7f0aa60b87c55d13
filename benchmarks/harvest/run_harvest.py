"""The harvest (issue 38 part 5): run each package's tests or example program under
`gradlab record`, check what was recorded with `gradlab check`, and print RESULTS.md's table.

Use: bash benchmarks/harvest/install.sh ; python benchmarks/harvest/run_harvest.py [--only PKG ...]
The packages live in $GRADLAB_HARVEST (default ~/.cache/gradlab-harvest): site/ (installed with
--no-deps), src/ (unpacked sdists with their tests). Recorded specs and check reports go to
$GRADLAB_HARVEST/out/<package>/. Counts in the table are of recorded calls (one case of a recorded
spec per distinct call signature), each judged by the worst of its rows (declared skips aside).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HARVEST = Path(os.environ.get("GRADLAB_HARVEST", Path.home() / ".cache" / "gradlab-harvest"))
SITE, SRC, OUT = HARVEST / "site", HARVEST / "src", HARVEST / "out"
BIN = Path(sys.executable).parent
CHECK_TIMEOUT = "60"  # seconds per recorded case: the brief's bound on one check run
EX = HERE / "examples"
PYTEST = [str(BIN / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]

# package: (version, new to benchmarks/thirdparty?, its import folder in site/, (cwd, argv) to run)
PACKAGES = {
    "pypose": ("0.9.5", True, "pypose", (None, ["examples/pypose_lie.py"])),
    "linear-operator": (
        "0.6.1",
        True,
        "linear_operator",
        (
            "src/linear_operator-0.6.1",
            [
                *PYTEST,
                "test/functions/test_matmul.py",
                "test/functions/test_inv_quad_logdet.py",
                "test/functions/test_dsmm.py",
            ],
        ),
    ),
    "snntorch": ("1.0.0", True, "snntorch", (None, ["examples/snntorch_surrogate.py"])),
    "spikingjelly": ("2.0.0", True, "spikingjelly", (None, ["examples/spikingjelly_surrogate.py"])),
    "sinabs": (
        "3.1.3",
        True,
        "sinabs",
        (
            "src/sinabs-3.1.3",
            [*PYTEST, "tests/test_surrogate_gradients.py", "tests/test_quantize.py"],
        ),
    ),
    "geomloss": ("0.3.1", True, "geomloss", (None, ["examples/geomloss_kernels.py"])),
    "brevitas": ("0.13.4", True, "brevitas", (None, ["examples/brevitas_ste.py"])),
    "torchkbnufft": (
        "1.5.2",
        True,
        "torchkbnufft",
        ("src/torchkbnufft-1.5.2", [*PYTEST, "tests/test_interp.py", "-k", "test_interp_autograd"]),
    ),
    "kymatio": ("0.3.0", True, "kymatio", (None, ["examples/kymatio_scattering.py"])),
    "torch-interpol": ("0.3.0", True, "interpol", (None, ["examples/interpol_splines.py"])),
    "torchsparsegradutils": (
        "0.2.7",
        True,
        "torchsparsegradutils",
        ("site/torchsparsegradutils/tests", [*PYTEST, "test_sparse_matmul.py", "-k", "cpu"]),
    ),
    "pylops": ("2.8.0", True, "pylops", (None, ["examples/pylops_torchop.py"])),
    "memcnn": (
        "1.5.2",
        True,
        "memcnn",
        ("site", [*PYTEST, "memcnn/models/tests/test_revop.py", "-k", "not cuda"]),
    ),
    "pytorch-tabnet": ("4.1.0", True, "pytorch_tabnet", (None, ["examples/tabnet_sparsemax.py"])),
    "efficientnet-pytorch": (
        "0.7.1",
        True,
        "efficientnet_pytorch",
        (None, ["examples/efficientnet_swish.py"]),
    ),
    "pytorch-revgrad": ("0.2.0", True, "pytorch_revgrad", (None, ["examples/revgrad_dann.py"])),
    "norse": ("1.1.0", True, "norse", (None, ["examples/norse_lif.py"])),
    "gpytorch": ("1.15.2", True, "gpytorch", (None, ["examples/gpytorch_lognormalcdf.py"])),
    "monai": ("1.6.1", True, "monai", (None, ["examples/monai_swish.py"])),
    "entmax": ("1.3", False, "entmax", (None, ["examples/entmax_losses.py"])),
    "sparsemax": ("0.1.9", False, "sparsemax", (None, ["examples/sparsemax_attention.py"])),
    "torch-struct": ("0.5", False, "torch_struct", (None, ["examples/torch_struct_crf.py"])),
    "roma": ("1.8.0", False, "roma", (None, ["examples/roma_procrustes.py"])),
}
TABLE_BEGIN, TABLE_END = "<!-- table: run_harvest.py -->", "<!-- table end -->"
RANK = {"fail": 4, "error": 3, "warn": 2, "pass": 1}
FUNCTION_CLASS = re.compile(r"^\s*class \w+\([^)]*Function\)\s*:", re.M)


def functions_found(pkg_dir: Path) -> int:
    """Classes deriving from an autograd Function whose module defines a backward."""
    n = 0
    for f in pkg_dir.rglob("*.py"):
        text = f.read_text(errors="replace")
        if "def backward" in text:
            n += len(FUNCTION_CLASS.findall(text))
    return n


def run(argv, cwd, log):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")])
    )
    with Path(log).open("w") as f:
        return subprocess.run(argv, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode


def record(name, cwd, argv, out):
    """gradlab record the package's program; returns the record summary."""
    if out.exists():
        shutil.rmtree(out)
    cwd = HERE if cwd is None else HARVEST / cwd
    if argv[0].endswith(".py"):
        argv = [str(BIN / "python"), str(HERE / argv[0]), *argv[1:]]
    rc = run(
        [str(BIN / "gradlab"), "record", "--out", str(out / "rec"), "--", *argv],
        cwd,
        out.parent / f"{name}.record.log",
    )
    summary = out / "rec" / "record" / "summary.yaml"
    return (yaml.safe_load(summary.read_text()) if summary.exists() else {}), rc


def check(name, out):
    """gradlab check the recorded folder, bounded per case, one worker."""
    log = out.parent / f"{name}.check.log"
    run(
        [
            str(BIN / "gradlab"),
            "check",
            str(out / "rec"),
            "--timeout",
            CHECK_TIMEOUT,
            "--jobs",
            "1",
            "--report-dir",
            str(out / "report"),
        ],
        REPO,
        log,
    )


def tally(name, version, new, pkg_dir, summary, worst):
    ops = summary.get("ops", [])
    calls = sum(o.get("calls", 0) for o in ops)
    cases = sum(o.get("cases", 0) for o in ops)
    unrep = sum(
        sum(v.values()) if isinstance(v, dict) else len(v or [])
        for o in ops
        for v in [o.get("unreplayable") or {}]
    )
    counts = dict.fromkeys(("pass", "warn", "fail", "error"), 0)
    for st in (worst or {}).values():
        counts[st] += 1
    return {
        "package": f"{name} {version}",
        "new": "yes" if new else "no",
        "functions": functions_found(SITE / pkg_dir),
        "ops_called": len(ops),
        "calls": calls,
        "replayable": cases,
        "unreplayable": unrep,
        "checked": len(worst or {}),
        **counts,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="packages to run (default: all)")
    ap.add_argument("--table-only", action="store_true", help="re-tally existing outputs")
    ap.add_argument("--write", action="store_true", help="put the table into RESULTS.md")
    a = ap.parse_args()
    rows = []
    for name, (version, new, pkg_dir, (cwd, argv)) in PACKAGES.items():
        if a.only and name not in a.only:
            continue
        out = OUT / name
        if not a.table_only:
            out.mkdir(parents=True, exist_ok=True)
            record(name, cwd, argv, out)
            check(name, out)
        sp = out / "rec" / "record" / "summary.yaml"
        summary = yaml.safe_load(sp.read_text()) if sp.exists() else {}
        worst = check_result(out)
        rows.append(tally(name, version, new, pkg_dir, summary, worst))
        out.mkdir(parents=True, exist_ok=True)
        (out / "worst.json").write_text(json.dumps({f"{k[0]}/{k[1]}": v for k, v in worst.items()}))
    cols = list(rows[0]) if rows else []
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    tot = {c: sum(r[c] for r in rows) for c in cols[2:]}
    lines.append(
        "| total | "
        + str(sum(r["new"] == "yes" for r in rows))
        + " new | "
        + " | ".join(str(tot[c]) for c in cols[2:])
        + " |"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    if a.write:
        res = HERE / "RESULTS.md"
        head, rest = res.read_text().split(TABLE_BEGIN + "\n", 1)
        tail = rest.split(TABLE_END, 1)[1]
        res.write_text(head + TABLE_BEGIN + "\n" + "\n".join(lines) + "\n" + TABLE_END + tail)


def check_result(out):
    reports = sorted((out / "report").glob("check-*.json"))
    if not reports:
        return {}
    worst = {}
    for row in json.loads(reports[-1].read_text())["rows"]:
        key = (row["op"], row["case"])
        st = row["status"]
        if st == "skip" and not row.get("declared"):
            st = "error"
        worst.setdefault(key, "pass")
        if RANK.get(st, 0) > RANK[worst[key]]:
            worst[key] = st
    return worst


if __name__ == "__main__":
    main()
