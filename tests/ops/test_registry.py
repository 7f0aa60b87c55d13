"""The registry: every op module registered, its facts true, every op passing on CPU."""

import pkgutil

import pytest

import gradlab.ops
from gradlab import ops
from gradlab.engine import Options, run
from gradlab.model import OpDef, Target

NOT_OPS = {"base"}


def test_every_op_module_is_registered() -> None:
    modules = {m.name for m in pkgutil.iter_modules(gradlab.ops.__path__)} - NOT_OPS
    assert modules == {e.module.rpartition(".")[2] for e in ops.BUNDLED}


@pytest.mark.parametrize("entry", ops.BUNDLED, ids=lambda e: e.name)
def test_registry_facts_match_the_module(entry: ops.OpEntry) -> None:
    op = ops.load(entry.name)
    assert isinstance(op, OpDef)
    assert op.name == entry.name
    assert op.second_order == entry.second_order
    assert tuple(op.devices) == entry.devices
    assert op.cases, "an op needs default cases"
    assert op.reference is not None, "a bundled op needs a plain-autograd reference"


@pytest.mark.parametrize("entry", ops.BUNDLED, ids=lambda e: e.name)
def test_bundled_op_passes_every_check_on_cpu(entry: ops.OpEntry) -> None:
    report = run([Target(ops.load(entry.name))], Options(devices=("cpu",)))
    assert report.passed, [(r.case, r.dtype, r.variant, r.check, r.hint, r.message)
                           for r in report.failures]
    checks = {r.check for r in report.rows}
    assert {"forward", "gradient", "contract", "gradcheck", "gradgradcheck"} <= checks
