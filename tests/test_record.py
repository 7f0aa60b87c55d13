"""gradlab record: the recorder (Function.apply inside nn.Modules, nested calls, custom ops,
the signature limit, the size cap, calls that cannot be replayed, each listed with its reason),
the command's output and exit status passed through, the pytest option, and the round trip of
a recorded program to `gradlab check`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch
import yaml
from record_functions import Cast, Double, Layer, Outer
from torchguards import needs

from gradlab.record.command import RECORD
from gradlab.record.session import InProcess

DATA = Path(__file__).resolve().parent / "data" / "record"
GRADLAB = [sys.executable, "-m", "gradlab"]


def recorded(folder: Path, run, max_signatures: int = 3, max_bytes: int = 4 << 20):
    """`run()` recorded in this process into `folder`: (what finish returned, summary)."""
    session = InProcess(folder, max_signatures, max_bytes)
    session.start()
    try:
        run()
    finally:
        done = session.finish("test", 0)
    return done, yaml.safe_load((folder / RECORD / "summary.yaml").read_text())


def op_summary(summary: dict, name: str) -> dict:
    return next(op for op in summary["ops"] if op["op"] == name)


def test_apply_in_a_module_and_nested_calls(tmp_path: Path) -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    _, summary = recorded(tmp_path, lambda: Layer()(x).sum().backward())
    outer, inner = op_summary(summary, "record_functions:Outer"), op_summary(
        summary, "record_functions:Double")
    assert (outer["calls"], outer["cases"], inner["calls"], inner["cases"]) == (1, 1, 1, 1)
    spec = yaml.safe_load((tmp_path / "Double.yaml").read_text())
    assert spec["function"].endswith(":Double") and spec["dtypes"] == ["float64"]
    a0, scale = spec["cases"][0]["args"]
    assert scale == 3.0  # the nested call's own arguments
    saved = torch.load(tmp_path / a0["file"], weights_only=True)[a0["key"]]
    assert torch.equal(saved, x.detach())
    from gradlab.spec import resolve

    targets = resolve(str(tmp_path))
    assert sorted(t.op.name for t in targets) == ["Double", "Outer"]
    assert {t.op.function.__self__ for t in targets} == {Double, Outer}  # Function.apply


def test_signature_limit_and_size_cap(tmp_path: Path) -> None:
    def run() -> None:
        for n in range(1, 6):
            Double.apply(torch.ones(n, requires_grad=True))
        for _ in range(4):  # the same signature again: counted, not stored again
            Double.apply(torch.ones(1, requires_grad=True))
        Double.apply(torch.ones(1000, requires_grad=True))  # 4000 bytes: over the cap

    _, summary = recorded(tmp_path, run, max_signatures=2, max_bytes=1000)
    op = op_summary(summary, "record_functions:Double")
    assert (op["calls"], op["cases"]) == (10, 2)
    assert op["left_out"] == {"over the limit of 2 signatures per op": 4}
    spec = yaml.safe_load((tmp_path / "Double.yaml").read_text())
    assert len(spec["cases"]) == 2


def test_size_cap_alone(tmp_path: Path) -> None:
    _, summary = recorded(tmp_path, lambda: Double.apply(torch.ones(1000)), max_bytes=1000)
    op = op_summary(summary, "record_functions:Double")
    assert op["cases"] == 0 and op["left_out"] == {
        "its tensors hold 4000 bytes, over the limit of 1000 bytes per call": 1}


def test_unreplayable_calls_are_listed_with_their_reason(tmp_path: Path) -> None:
    class Local(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    def run() -> None:
        Local.apply(torch.ones(2))
        Cast.apply(torch.ones(2), torch.float32)  # a dtype: no YAML value
        Double.apply(torch.tensor([1.0, float("nan")]))

    recorded(tmp_path, run)
    listed = yaml.safe_load((tmp_path / RECORD / "unreplayable.yaml").read_text())
    reasons = {(u["op"].rpartition(":")[2], u["reason"]) for u in listed}
    assert any(op.endswith("Local") and "defined inside a function" in r for op, r in reasons)
    assert any(op == "Cast" and "argument 1 is a torch.dtype" in r for op, r in reasons)
    assert any(op == "Double" and "NaN or infinite" in r for op, r in reasons)
    assert not (tmp_path / "Local.yaml").exists() and not (tmp_path / "Double.yaml").exists()


def test_custom_op(tmp_path: Path) -> None:
    needs("library_custom_op")
    from record_functions import cube

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    _, summary = recorded(tmp_path, lambda: (cube(x) + torch.ops.gradlab_test_record.cube(x))
                          .sum().backward())
    op = op_summary(summary, "gradlab_test_record::cube")
    assert (op["kind"], op["calls"], op["cases"]) == ("custom_op", 2, 1)
    spec = yaml.safe_load((tmp_path / "cube.yaml").read_text())
    assert spec["function"].endswith(":cube")
    from gradlab.spec import resolve

    (target,) = resolve(str(tmp_path))
    # the recorded op is checked as a torch.library op (opcheck's rows beside the others)
    from gradlab.customops import LibraryOp

    assert isinstance(target.op.function, LibraryOp)
    assert target.op.function.qualname == "gradlab_test_record::cube"


def test_gradlabs_own_calls_are_not_recorded(tmp_path: Path) -> None:
    import gradlab

    x = torch.randn(3, dtype=torch.float64)
    _, summary = recorded(tmp_path, lambda: gradlab.check(Double.apply, [x], variants=False,
                                                          checks=["jacobian"]))
    assert summary["ops"] == []


def test_layouts_and_requires_grad_in_the_spec(tmp_path: Path) -> None:
    t = torch.randn(4, 3, dtype=torch.float64).t()  # transposed: strides [1, 3]
    c = torch.randn(2, 3, 4, 5, dtype=torch.float32).to(memory_format=torch.channels_last)

    def run() -> None:
        Double.apply(t.requires_grad_(), 1.5)
        Double.apply(c, 1.5)

    recorded(tmp_path, run)
    cases = yaml.safe_load((tmp_path / "Double.yaml").read_text())["ops"]
    by_dtype = {op["dtypes"][0]: op["cases"][0]["args"][0] for op in cases}
    assert by_dtype["float64"]["strides"] == [1, 3]
    assert by_dtype["float32"]["layout"] == "channels_last"
    assert "requires_grad" not in by_dtype["float32"]  # none required grad: differentiated


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_output_and_exit_status_pass_through(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys, os, signal\nprint('out', flush=True)\n"
                      "print('err', file=sys.stderr, flush=True)\n"
                      "if sys.argv[1] == 'kill':\n    os.kill(os.getpid(), signal.SIGTERM)\n"
                      "sys.exit(int(sys.argv[1]))\n")
    for arg, status in (("3", 3), ("0", 0), ("kill", -signal.SIGTERM)):
        plain = run([sys.executable, str(script), arg], tmp_path)
        rec = run([*GRADLAB, "record", "--out", f"o{arg}", "--", sys.executable, str(script),
                   arg], tmp_path)
        assert plain.returncode == rec.returncode == status
        assert rec.stdout == plain.stdout == b"out\n"
        assert rec.stderr.startswith(plain.stderr)
        assert b"gradlab record: the command ended" in rec.stderr[len(plain.stderr):]
    missing = run([*GRADLAB, "record", "--out", "om", "--", str(tmp_path / "nope")], tmp_path)
    assert missing.returncode == 127
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    busy = run([*GRADLAB, "record", "--out", "full", "--", "true"], tmp_path)
    assert busy.returncode == 2 and b"not an empty folder" in busy.stderr


def test_pytest_option(tmp_path: Path) -> None:
    tests = Path(__file__).resolve().parent
    (tmp_path / "test_it.py").write_text(
        "import torch\nfrom record_functions import Layer\n\n"
        "def test_layer():\n    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)\n"
        "    Layer()(x).sum().backward()\n\n"
        "def test_fails():\n    assert False\n")
    plain = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"],
                tmp_path, {"PYTHONPATH": str(tests)})
    rec = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py",
               "--gradlab-record", "specs"], tmp_path, {"PYTHONPATH": str(tests)})
    assert plain.returncode == rec.returncode == 1  # a failing test still fails the run
    assert b"1 failed, 1 passed" in rec.stdout
    summary = yaml.safe_load((tmp_path / "specs" / RECORD / "summary.yaml").read_text())
    assert {op["op"]: op["cases"] for op in summary["ops"]} == {
        "record_functions:Outer": 1, "record_functions:Double": 1}
    assert summary["exit_status"] == 1


def test_four_functions_round_trip(tmp_path: Path) -> None:
    """A program with four Functions in nn.Modules, one wrong: its output unchanged, four
    recorded, and `gradlab check DIR` red on the wrong one alone."""
    script = str(DATA / "four_functions.py")
    plain = run([sys.executable, script], tmp_path)
    rec = run([*GRADLAB, "record", "--out", "rec", "--", sys.executable, script], tmp_path)
    assert rec.returncode == plain.returncode == 0
    assert rec.stdout == plain.stdout and b"step 2: loss" in plain.stdout
    assert rec.stderr.startswith(plain.stderr)
    specs = sorted(p.name for p in (tmp_path / "rec").glob("*.yaml"))
    assert specs == ["GateFn.yaml", "RowNormFn.yaml", "SoftplusFn.yaml", "SwishFn.yaml"]
    check = run([*GRADLAB, "check", "rec", "--report-dir", "rep"], tmp_path)
    assert check.returncode == 1, check.stderr.decode()[-2000:]
    (report,) = (tmp_path / "rep").glob("check-*.json")
    rows = json.loads(report.read_text())["rows"]
    assert {r["op"] for r in rows} == {"GateFn", "RowNormFn", "SoftplusFn", "SwishFn"}
    assert {r["op"] for r in rows if r["status"] in ("fail", "error")} == {"SoftplusFn"}


def test_unreplayable_calls_take_no_place_within_the_limit(tmp_path: Path) -> None:
    def run() -> None:
        Double.apply(torch.tensor([1.0, float("-inf")]))  # a mask's -inf: listed, not kept
        for n in range(1, 4):
            Double.apply(torch.ones(n, requires_grad=True))

    _, summary = recorded(tmp_path, run, max_signatures=2)
    op = op_summary(summary, "record_functions:Double")
    assert (op["calls"], op["cases"]) == (4, 2)
    assert op["left_out"] == {"over the limit of 2 signatures per op": 1}
    assert len(op["unreplayable"]) == 1 and "NaN or infinite" in op["unreplayable"][0]


def test_subprocesses_are_recorded(tmp_path: Path) -> None:
    """A launcher's child Python processes (pytest-xdist, multiprocessing, a shell script)
    inherit the recorder through the environment."""
    tests = Path(__file__).resolve().parent
    child = tmp_path / "child.py"
    child.write_text("import torch\nfrom record_functions import Double\n"
                     "Double.apply(torch.ones(3, requires_grad=True))\n")
    launcher = (f"import subprocess, sys; sys.exit(subprocess.run([sys.executable, "
                f"{str(child)!r}]).returncode)")
    rec = run([*GRADLAB, "record", "--quiet", "--out", "rec", "--", sys.executable, "-c",
               launcher], tmp_path, {"PYTHONPATH": str(tests)})
    assert rec.returncode == 0 and rec.stderr == b""
    summary = yaml.safe_load((tmp_path / "rec" / RECORD / "summary.yaml").read_text())
    assert [(op["op"], op["calls"], op["cases"]) for op in summary["ops"]] == [
        ("record_functions:Double", 1, 1)]


def test_a_package_whose_name_starts_with_torch_is_recorded(tmp_path: Path) -> None:
    """torch's own Functions are left out by package (torch, torch.*), not by a name prefix:
    a user package named torchfoo was recorded as nothing, silently."""
    from gradlab.record.wrap import torch_own

    assert torch_own("torch") and torch_own("torch.utils.checkpoint")
    assert not torch_own("torchkbnufft") and not torch_own("torchfoo._ops")
    pkg = tmp_path / "src"
    pkg.mkdir()
    (pkg / "torchfoo_ops.py").write_text(
        "import torch\n\n"
        "class Twice(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return 2 * x\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return 2 * g\n")
    sys.path.insert(0, str(pkg))
    try:
        import torchfoo_ops

        x = torch.randn(3, dtype=torch.float64, requires_grad=True)
        _, summary = recorded(tmp_path / "out", lambda: torchfoo_ops.Twice.apply(x).sum()
                              .backward())
    finally:
        sys.path.remove(str(pkg))
    assert op_summary(summary, "torchfoo_ops:Twice")["calls"] == 1
