"""The GPU command (issue 24): every CUDA path of gradlab in one run, one report folder.

    bash scripts/dev.sh gpu                      # every phase -> reports/gpu-<date>-<gpu>/
    bash scripts/dev.sh gpu --phase involution   # one phase (repeatable); env always runs
    bash scripts/dev.sh gpu --dry-run            # the plan only: runs nothing, writes nothing
    bash scripts/gpu_out.sh [--dry-run]          # the 8-minute profile ("out"), files in $OUT

Phases, each a subprocess with its own timeout (their sum stays under the profile's limit):
  env           nvidia-smi and the torch / triton / CUDA versions
  tests         pytest -m cuda (the tests that need a GPU; skipped elsewhere)
  check         gradlab check specs/ --device cuda (declared dtypes), TF32 on
  bench         gradlab bench specs/involution.yaml --device cuda (profile "full" only)
  involution    benchmarks/bench_involution.py, float32 stages: new kernels vs the official
                ones (when $GRADLAB_OFFICIAL_INVOLUTION names them) vs unfold; bundled cases
  involution_s2 the same at RedNet-50's stride-2 layers, float32
  involution16  the stages in float16 and bfloat16 (goal 2 against involution's float32)
Every phase runs even when an earlier one failed; a phase whose packages are missing is skipped
(stderr names the package) and the others run; the exit status is 1 when any failed or was
skipped (stderr names them), 2 for a usage error or no CUDA device, 0 otherwise.  docs/gpu.md
says what to expect.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # gradlab from this checkout, installed or not

#: The whole run must fit in ten minutes on one GPU (issue 24): the phases' timeouts add up to
#: less, leaving time for starting Python and writing the summary.
TOTAL_LIMIT_S = 600
#: scripts/gpu_out.sh's profile ("out") must fit in eight minutes (issue 41), with
#: OUT_MARGIN_S left for Python's start, the summary and the tarball.
OUT_LIMIT_S = 480
OUT_MARGIN_S = 20
#: tests: about 120 cuda-marked tests, 86 of them the RedNet layer list at batch up to 64 in
#: three dtypes and two layouts (516 checks against a float64 reference), 6 every autotuning
#: candidate of the involution kernels; run by XDIST_WORKERS processes, which compile the Triton
#: variants side by side (and leave them in Triton's cache for the involution phase).  check:
#: on the first lent H200 (2026-11-28) blur, conv2d, exp and involution took 36 s of check
#: work (involution 23.5 s: its Triton kernels compile per shape and dtype, float16 included)
#: and a 35 s budget stopped the run there, half-way through the specs; the other four ops are
#: lighter, so 105-110 s of budget holds the whole run.  involution: four stages x three
#: implementations, the kernels alone and each shape's variant timing took 29 s there (46 s
#: in two 16-bit dtypes, 34 s for the stride-2 layers and bundled cases): their boxes keep
#: about 1.5x that.
TIMEOUTS_S = {"env": 20, "tests": 160, "check": 140, "bench": 60, "involution": 80,
              "involution_s2": 50, "involution16": 60}
#: The "out" profile: its phases in the order they run (the measurements first, so a short
#: device lease spends itself on them) and their timeouts; no bench phase (its involution
#: cases are the involution phase's too).
OUT_TIMEOUTS_S = {"env": 15, "involution": 70, "involution_s2": 50, "involution16": 70,
                  "check": 145, "tests": 110}
PROFILES = {"full": TIMEOUTS_S, "out": OUT_TIMEOUTS_S}
PROFILE_LIMITS_S = {"full": TOTAL_LIMIT_S, "out": OUT_LIMIT_S}
#: pytest-xdist workers for the tests phase (when xdist is there): compiles run in parallel;
#: the largest RedNet shapes hold some 8 GB of GPU memory each.
XDIST_WORKERS = 4
PHASES = tuple(TIMEOUTS_S)
#: `gradlab check` stops starting cases this long before the phase's timeout, so a slow run
#: still writes its report (the run then fails, as a budget stop does).
CHECK_REPORT_MARGIN_S = 40
#: The dtypes the check phase runs where a spec declares them (issue 24).
GPU_DTYPES = ("float32", "float64", "float16", "bfloat16")
INVOLUTION_DTYPES = ("float32", "float16", "bfloat16")
#: Environment variables of the check phase: TF32 on for float32 matmuls too (cuDNN's
#: convolutions have it on by default), as issue 41 asks the check to pass.
TF32_ON = (("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1"),)
#: The variable naming the official involution kernels (benchmarks/bench_involution.py).
OFFICIAL_ENV = "GRADLAB_OFFICIAL_INVOLUTION"
#: The involution phases' autotuning (gradlab/kernels/involution_launch.py, AUTOTUNE_ENV) unless
#: the environment sets it: time the kernel variants per shape at their default block sizes,
#: tune no block size.  A full sweep compiles every candidate of every variant (some 70
#: compiles of 1.5-6 s per dtype) and would not fit the time boxes; issue 29's run found the
#: forward's block sizes within 10% of each other.  GRADLAB_INVOLUTION_AUTOTUNE=1 tunes both.
AUTOTUNE_ENV = "GRADLAB_INVOLUTION_AUTOTUNE"
INVOLUTION_AUTOTUNE = "variants"
SPECS = ROOT / "specs"
BENCH_SPEC = SPECS / "involution.yaml"
CUDA_MARK = re.compile(r"pytest\.mark\.cuda\b")


@dataclass(frozen=True)
class Step:
    """One command of a phase; its stdout and stderr go to `log`."""

    argv: tuple[str, ...]
    log: Path
    #: environment variables set for this command alone
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Phase:
    name: str
    timeout_s: int
    steps: tuple[Step, ...]
    notes: tuple[str, ...]  # what the dry run lists: specs, dtypes, tests, outputs
    #: modules the phase imports (module: package); one missing skips the phase
    needs: tuple[tuple[str, str], ...] = ()


def slug(text: str) -> str:
    """A folder-name-safe form of a GPU name: "NVIDIA H100 80GB HBM3" -> nvidia-h100-80gb-hbm3."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def default_out(gpu_name: str | None, today: datetime.date) -> Path:
    """reports/gpu-<date>-<gpu name>, with -2, -3, ... when that folder exists already."""
    base = ROOT / "reports" / f"gpu-{today.isoformat()}-{slug(gpu_name or 'no-cuda-device')}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


#: What each phase imports (module, the package that provides it).  Offline, with no index to
#: install from, they must be there already (the system's site-packages count); a phase whose
#: package is missing is skipped, the others run.  Optional: pytest-xdist (the tests run in one
#: process without it), matplotlib (no plots), junitparser and hypothesis (the tests that use
#: them skip).
GRADLAB_NEEDS = (("typer", "typer"), ("rich", "rich"), ("yaml", "pyyaml"), ("pandas", "pandas"))
NEEDS = {"env": (), "tests": (("pytest", "pytest"), *GRADLAB_NEEDS),
         "check": GRADLAB_NEEDS, "bench": GRADLAB_NEEDS,
         "involution": (("yaml", "pyyaml"), ("triton", "triton"))}
NEEDS["involution_s2"] = NEEDS["involution16"] = NEEDS["involution"]


def missing_modules(needs: tuple[tuple[str, str], ...] = tuple(
        dict.fromkeys(n for v in NEEDS.values() for n in v))) -> list[str]:
    """The packages of `needs` (default: every phase's) that cannot be imported here."""
    return [pkg for module, pkg in needs if not has_module(module)]


def cuda_test_files() -> list[Path]:
    """The test files carrying the cuda marker: the tests phase collects only these."""
    return [p for p in sorted((ROOT / "tests").rglob("*.py"))
            if CUDA_MARK.search(p.read_text(encoding="utf-8"))]


def cuda_tests() -> list[str]:
    """'file: N' for each test file carrying the cuda marker (read, not collected)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        n = len(CUDA_MARK.findall(path.read_text(encoding="utf-8")))
        if n:
            found.append(f"{path.relative_to(ROOT)}: {n} cuda mark{'s' * (n != 1)}")
    return found


def spec_notes(bench: bool) -> list[str]:
    """Per spec file: op, cases and the dtypes the phase runs (check: the declared ones among
    GPU_DTYPES; bench: gradlab bench's own choice, the declared ones without float64)."""
    from gradlab.bench.runner import bench_cases
    from gradlab.spec.files import load_file

    notes = []
    for path in [BENCH_SPEC] if bench else sorted(SPECS.glob("*.y*ml")):
        for t in load_file(path):
            declared = t.dtypes or t.op.dtypes
            if bench:
                dtypes = tuple(d for d in declared if d != "float64") or declared[:1]
                cases = f"{len(bench_cases(t.op))} bench cases"
            else:
                dtypes = tuple(d for d in declared if d in GPU_DTYPES)
                cases = f"{len(t.op.cases)} cases"
            notes.append(f"{path.relative_to(ROOT)}: {t.op.name}, {cases}, dtypes "
                         f"{', '.join(dtypes) or 'none of ' + '/'.join(GPU_DTYPES)}")
    return notes


#: What each involution phase passes benchmarks/bench_involution.py (besides --device cuda,
#: --goals and its outputs), and what its dry run says.  Only the new kernels (v1 is kept for
#: hand runs: its compiles would crowd the time box); the official kernels when the
#: environment names them.
INVOLUTION_RUNS = {
    "involution": (("--dtype", "float32", "--stages-only", "--no-cases"),
                   "float32, the four RedNet-50 stages"),
    "involution_s2": (("--dtype", "float32", "--shape", "stage2_s2_c128_56", "--shape",
                       "stage3_s2_c256_28", "--shape", "stage4_s2_c512_14"),
                      "float32, RedNet-50's three stride-2 layers and the bundled bench cases "
                      "of specs/involution.yaml (stride 2, dilation 2)"),
    "involution16": (("--dtype", "float16", "--dtype", "bfloat16", "--stages-only",
                      "--no-cases"),
                     "float16 and bfloat16, the four stages; goal 2 against the involution "
                     "phase's float32 (--prior-json)"),
}


def involution_phase(name: str, timeout_s: int, out: Path, python: str, plots: bool) -> Phase:
    """One run of benchmarks/bench_involution.py into out/NAME/NAME.{json,csv,md,png}."""
    args, what = INVOLUTION_RUNS[name]
    folder = out / name
    prior = (("--prior-json", str(out / "involution" / "involution.json"))
             if name == "involution16" else ())
    official = os.environ.get(OFFICIAL_ENV)
    tune = os.environ.get(AUTOTUNE_ENV, INVOLUTION_AUTOTUNE)
    return Phase(name, timeout_s, (
        Step((python, str(ROOT / "benchmarks" / "bench_involution.py"), "--device", "cuda",
              *args, "--kernels", "new", *prior, "--goals",
              "--json", str(folder / f"{name}.json"), "--csv", str(folder / f"{name}.csv"),
              "--markdown", str(folder / f"{name}.md"),
              *(("--plot", str(folder / f"{name}.png")) if plots else ())),
             folder / f"{name}.log", ((AUTOTUNE_ENV, tune),)),),
        (f"{what}; the new kernels (each shape's variant timed and recorded) beside the unfold "
         "reference", f"autotuning: {AUTOTUNE_ENV}={tune}",
         f"official kernels: {official}" if official else
         f"official kernels: skipped ({OFFICIAL_ENV} is not set)"), NEEDS[name])


def plan(out: Path, python: str = sys.executable,
         timeouts: dict[str, int] = TIMEOUTS_S) -> list[Phase]:
    """Every phase of `timeouts` (in its order), with its commands, logs and notes, every path
    resolved under `out`."""
    py, gradlab = (python,), (python, "-m", "gradlab")
    plots = ("--plots",) if has_module("matplotlib") else ()
    plot_note = ["plots: PNGs under plots/" if plots else "plots: none (matplotlib missing)"]
    # without xdist, "-n 0" would be an unknown option: pytest runs in this process
    xdist = str(XDIST_WORKERS) if has_module("xdist") else "0"
    env, tests, check, bench = (out / p for p in ("env", "tests", "check", "bench"))
    budget = timeouts["check"] - CHECK_REPORT_MARGIN_S
    phases = {
        "env": Phase("env", timeouts["env"], (
            Step(("nvidia-smi",), env / "nvidia-smi.txt"),
            Step(("nvidia-smi", "-q"), env / "nvidia-smi-q.txt"),
            Step((*py, str(Path(__file__).resolve()), "--versions", str(env / "versions.json")),
                 env / "versions.log")), ("writes versions.json: python, torch, CUDA, cuDNN, "
                                          "triton, gradlab, git commit, GPUs",)),
        "tests": Phase("tests", timeouts["tests"], (
            Step((*py, "-m", "pytest", "-m", "cuda", "-n", xdist, "-p", "no:cacheprovider",
                  "-rs", f"--junitxml={tests / 'junit.xml'}",
                  *(str(f) for f in cuda_test_files())),
                 tests / "pytest.log"),), (*cuda_tests(), f"pytest-xdist workers: {xdist}"),
            NEEDS["tests"]),
        "check": Phase("check", timeouts["check"], (
            Step((*gradlab, "check", str(SPECS), "--device", "cuda", "--report-dir", str(check),
                  "--junit", str(check / "junit.xml"), "--summary-md", str(check / "summary.md"),
                  "--budget", str(budget), *plots), check / "check.log", TF32_ON),),
            (*spec_notes(bench=False), *plot_note,
             "TF32 on: " + " ".join(f"{k}={v}" for k, v in TF32_ON)), NEEDS["check"]),
        "bench": Phase("bench", timeouts.get("bench", 0), (
            Step((*gradlab, "bench", str(BENCH_SPEC), "--device", "cuda", "--report-dir",
                  str(bench), "--junit", str(bench / "junit.xml"), *plots), bench / "bench.log"),),
            (*spec_notes(bench=True), *plot_note), NEEDS["bench"]),
    }
    for name in INVOLUTION_RUNS:
        phases[name] = involution_phase(name, timeouts.get(name, 0), out, python, bool(plots))
    return [phases[name] for name in timeouts]


def versions(path: Path) -> None:
    """Write what ran: every report's environment record (gradlab.envinfo: Python, torch, CUDA,
    cuDNN, gradlab, the commit, the device), with triton and every GPU added."""
    import torch

    from gradlab.envinfo import environment

    cuda = torch.cuda.is_available()
    info: dict[str, object] = {**environment(device="cuda" if cuda else "cpu"),
                               "cuda_available": cuda}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    info["gpus"] = [{"name": torch.cuda.get_device_name(i),
                     "capability": ".".join(map(str, torch.cuda.get_device_capability(i))),
                     "memory_bytes": torch.cuda.get_device_properties(i).total_memory}
                    for i in range(torch.cuda.device_count())]
    path.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def run_step(step: Step, deadline: float) -> str:
    """Run one command to its log; '' when it passed, else what went wrong."""
    step.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MPLBACKEND": "Agg", **dict(step.env),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with step.log.open("w", encoding="utf-8") as log:
        try:
            # a session of its own: a timeout ends the command and everything it started
            proc = subprocess.Popen(step.argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
        except OSError as exc:
            return f"{step.argv[0]}: {exc.strerror}"
        try:
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return "timed out"
    return f"exit {rc}" if rc else ""


def run_phase(phase: Phase) -> dict[str, object]:
    """Run a phase's steps in order (stopping at the first failure) within its timeout; skip
    it, saying which package is missing, when it cannot import what it needs."""
    missing = missing_modules(phase.needs)
    if missing:
        problem = f"skipped: missing package(s) {', '.join(missing)}"
        print(f"gpu: {phase.name}: {problem}", flush=True)
        return {"phase": phase.name, "status": "skipped", "problem": problem, "seconds": 0.0,
                "timeout_s": phase.timeout_s, "logs": []}
    start = time.monotonic()
    problem = ""
    for step in phase.steps:
        problem = run_step(step, start + phase.timeout_s)
        if problem == "timed out":
            problem = f"timed out after {phase.timeout_s} s"
        if problem:
            problem = f"{shlex.join(step.argv[:3])}...: {problem} (log {step.log.name})"
            break
    seconds = time.monotonic() - start
    print(f"gpu: {phase.name}: {'FAILED: ' + problem if problem else 'passed'} "
          f"({seconds:.0f} s)", flush=True)
    return {"phase": phase.name, "status": "failed" if problem else "passed",
            "problem": problem, "seconds": round(seconds, 1), "timeout_s": phase.timeout_s,
            "logs": [str(s.log) for s in phase.steps]}


def summarize(out: Path, results: list[dict[str, object]]) -> None:
    """summary.json and summary.md: versions, each phase's outcome, the involution goals."""
    info_path = out / "env" / "versions.json"
    info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    (out / "summary.json").write_text(json.dumps(
        {"versions": info, "phases": results, "files": files}, indent=2) + "\n", encoding="utf-8")
    gpus = ", ".join(str(g["name"]) for g in info.get("gpus", [])) or "?"
    lines = [f"# GPU run {out.name}", "",
             f"GPU {gpus}; torch {info.get('torch_version')}, CUDA {info.get('cuda_version')}, "
             f"triton {info.get('triton')}, gradlab {info.get('gradlab_version')} at "
             f"{info.get('git_commit')}.", "",
             "| phase | status | seconds | timeout | problem |", "|---|---|---:|---:|---|"]
    lines += [f"| {r['phase']} | {r['status']} | {r['seconds']} | {r['timeout_s']} | "
              f"{r['problem'] or ''} |" for r in results]
    for title, rel in (("Involution, float32 stages", "involution/involution.md"),
                       ("Involution, stride 2 and dilated", "involution_s2/involution_s2.md"),
                       ("Involution, float16 and bfloat16", "involution16/involution16.md"),
                       ("gradlab check (TF32 on)", "check/summary.md")):
        if (out / rel).exists():
            lines += ["", f"## {title} ({rel})", "", (out / rel).read_text(encoding="utf-8")]
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def dry_run(phases: list[Phase], out: Path, gpu: str | None, why_none: str,
            limit_s: int = TOTAL_LIMIT_S) -> int:
    """Print the plan: the folder, every phase's commands, logs and notes; launch nothing."""
    print("gpu: dry run: every phase planned, nothing launched, nothing written")
    print(f"output folder: {out}")
    print(f"GPU: {gpu}" if gpu else f"GPU: none ({why_none}); a real run would exit 2")
    missing = missing_modules()
    packages = (f"MISSING {', '.join(missing)} (a real run skips the phases that need them)"
                if missing else "there")
    triton = "there" if has_module("triton") else "MISSING (involution runs its torch path)"
    print(f"packages the phases import: {packages}; triton: {triton}")
    total = sum(p.timeout_s for p in phases)
    print(f"phase timeouts: {total} s in all (the whole run: under {limit_s} s)")
    for p in phases:
        print(f"\nphase {p.name} (timeout {p.timeout_s} s)")
        for note in p.notes:
            print(f"  {note}")
        for s in p.steps:
            print(f"  $ {shlex.join(s.argv)}\n    > {s.log}")
    print(f"\nthen: {out / 'summary.json'} and {out / 'summary.md'}")
    return 0


def with_timeout(phase: Phase, overrides: list[str]) -> Phase:
    """`phase` with the timeout that a `--timeout PHASE=SECONDS` names for it, if any."""
    for item in overrides:
        name, _, seconds = item.partition("=")
        if name == phase.name:
            if not seconds.isdigit() or int(seconds) < 1:
                raise SystemExit(f"gpu: --timeout {item}: expected PHASE=SECONDS, seconds >= 1")
            return Phase(phase.name, int(seconds), phase.steps, phase.notes, phase.needs)
    return phase


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/dev.sh gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=tuple(PROFILES), default="full",
                        help="full: every phase in ten minutes (dev.sh gpu); out: the eight-"
                        "minute run of scripts/gpu_out.sh, measurements first")
    parser.add_argument("--phase", action="append", choices=PHASES,
                        help="run only this phase (repeatable; env always runs)")
    parser.add_argument("--timeout", action="append", default=[], metavar="PHASE=SECONDS",
                        help="another timeout for a phase (repeatable), e.g. tests=120")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan (commands, folder, specs, dtypes); run nothing")
    parser.add_argument("--out", type=Path, help="report folder (default: reports/gpu-<date>-"
                        "<gpu name>)")
    parser.add_argument("--versions", type=Path, help=argparse.SUPPRESS)  # the env phase's step
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.versions:
        versions(args.versions)
        return 0
    import torch

    cuda = torch.cuda.is_available()
    gpu = torch.cuda.get_device_name() if cuda else None
    why_none = f"torch {torch.__version__}: torch.cuda.is_available() is False"
    out = (args.out.resolve() if args.out else default_out(gpu, datetime.date.today()))
    # phases run in the order --phase names them (env first): what matters most goes first
    # when a device's time is short
    profile = PROFILES[args.profile]
    order = ["env", *[p for p in (args.phase or profile) if p != "env"]]
    by_name = {p.name: p for p in plan(out, timeouts={**TIMEOUTS_S, **profile})}
    phases = [with_timeout(by_name[name], args.timeout) for name in dict.fromkeys(order)
              if name in by_name]
    if args.dry_run:
        return dry_run(phases, out, gpu, why_none, PROFILE_LIMITS_S[args.profile])
    if not cuda:
        print(f"gpu: no CUDA device ({why_none}); `bash scripts/dev.sh gpu --dry-run` shows "
              "the plan", file=sys.stderr)
        return 2
    for p in phases:
        if missing_modules(p.needs):
            print(f"gpu: phase {p.name} will be skipped: missing package(s) "
                  f"{', '.join(missing_modules(p.needs))} (offline? install them into the "
                  "system Python the venv sees)", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu: {gpu} -> {out}", flush=True)
    results = [run_phase(p) for p in phases]
    summarize(out, results)
    failed = [f"{r['phase']} ({r['problem']})" for r in results if r["status"] != "passed"]
    if failed:
        print(f"gpu: FAILED or skipped phase{'s' * (len(failed) > 1)}: {'; '.join(failed)}; see "
              f"{out / 'summary.md'}", file=sys.stderr)
        return 1
    print(f"gpu: every phase passed; see {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
