"""The registry: every op module registered, its facts true (its capabilities measured again),
its spec bundled, every op passing on CPU."""

import pickle
import pkgutil
from dataclasses import fields, replace

import pytest
import torch
import yaml
from torchguards import needs

import gradlab.ops
from gradlab import ops
from gradlab.checks.run.driver import run
from gradlab.checks.run.options import ALL_MEASURED, Options
from gradlab.model import OpDef
from gradlab.results.capabilities import capability_matrix
from gradlab.spec import resolve

NOT_OPS = {"base"}


def test_every_op_module_is_registered() -> None:
    modules = {m.name for m in pkgutil.iter_modules(gradlab.ops.__path__)} - NOT_OPS
    assert modules == {e.module.rpartition(".")[2] for e in ops.BUNDLED}


@pytest.mark.parametrize("entry", ops.BUNDLED, ids=lambda e: e.name)
def test_registry_facts_match_the_module(entry: ops.OpEntry) -> None:
    op = ops.load(entry.name)
    assert isinstance(op, OpDef)
    assert op.name == entry.name
    assert op.summary == entry.summary
    assert op.second_order == entry.second_order
    assert tuple(op.devices) == entry.devices
    assert op.reference is not None, "a bundled op needs a plain-autograd reference"
    # Cases live only in the spec file.
    assert not op.cases and not op.bench_cases, "cases belong in gradlab/specs/NAME.yaml"


@pytest.mark.parametrize("entry", ops.BUNDLED, ids=lambda e: e.name)
def test_every_op_has_a_bundled_spec_with_cases(entry: ops.OpEntry) -> None:
    spec = ops.spec_file(entry.name)
    assert spec.is_file(), f"no bundled spec file for {entry.name}"
    doc = yaml.safe_load(spec.read_text(encoding="utf-8"))
    assert doc.get("op") == entry.name
    (target,) = resolve(entry.name)
    assert target.op.name == entry.name
    assert target.op.cases, "a bundled spec needs at least one case"
    # a spec's op is the module's, imported on first use (specs load without torch)
    module_op = ops.load(entry.name)
    assert isinstance(target.op.function, ops.OpRef)
    assert target.op.function.resolve() is module_op.function
    assert ops.resolved(target.op).reference is module_op.reference
    facts = [f.name for f in fields(module_op) if f.name not in ("function", "reference")]
    lazy = ops.lazy(entry.name)
    assert [getattr(lazy, f) for f in facts] == [getattr(module_op, f) for f in facts]
    # a worker unpickles the op's own callable
    assert pickle.loads(pickle.dumps(target.op.function)) is module_op.function


@pytest.mark.parametrize("entry", ops.BUNDLED, ids=lambda e: e.name)
def test_bundled_op_passes_every_check_on_cpu(entry: ops.OpEntry) -> None:
    report = run(resolve(entry.name), Options(devices=("cpu",)))
    assert report.passed, [(r.case, r.dtype, r.variant, r.check, r.hint, r.reason)
                           for r in report.failures]
    checks = {r.check for r in report.rows}
    assert {"forward", "gradient", "contract", "jacobian", "second_order", "forward_ad",
            "autocast", "capabilities"} <= checks
    # issue 28: no jvp (none has one) is information, not a warn row per case
    assert not [(r.case, r.check, r.reason) for r in report.rows if r.status == "warn"]
    # what `gradlab list` says, measured again (torch.compile only on request: see below)
    (line,) = capability_matrix(report.rows)
    # with a GPU, cuda is measured too (the registry's "-" is the CPU-only machine's)
    measured = {"compile": "-"} | ({"cuda": "yes"} if torch.cuda.is_available() else {})
    assert line.states() == entry.capabilities | measured


@pytest.mark.parametrize("entry", ops.BUNDLED, ids=lambda e: e.name)
def test_bundled_op_compiles_as_the_registry_says(entry: ops.OpEntry) -> None:
    """torch.compile on the first case (the registry's facts come from every case, measured
    with `gradlab check specs/ --capabilities all`; all of them take seconds per op)."""
    needs("compile_traces_functions")  # an older torch.compile breaks the graph at a Function
    (target,) = resolve(entry.name)
    first = replace(target, op=replace(target.op, cases=target.op.cases[:1]))
    report = run([first], Options(devices=("cpu",), checks=frozenset({"capabilities"}),
                                  capabilities=ALL_MEASURED))
    (line,) = capability_matrix(report.rows)
    assert line.cell("compile").state == entry.capabilities["compile"], line.cell("compile")
