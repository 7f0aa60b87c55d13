"""Driving a check run: the work items in order, where they run (here or in worker
processes, side by side), and the report in plan order.

torch-free on purpose: an isolated run's parent process plans, dispatches and collects, while
its workers (gradlab.checks.run.isolate) import torch and make the rows (gradlab.checks.run.runner).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from gradlab.checks.run.isolate import OnWait, Outcome, Worker, run_parallel, stop_all
from gradlab.checks.run.options import Options
from gradlab.checks.run.plan import Item, plan
from gradlab.checks.run.progress import lost_item_rows, not_run_row
from gradlab.guard import case_bytes, default_limit
from gradlab.model import Target
from gradlab.results import SPEC_INPUTS, CheckRow, Report

#: Under --budget, numerical checks switch to fast mode once this fraction of it is spent.
BUDGET_FAST_FRACTION = 0.5

def run(targets: Sequence[Target], options: Options | None = None,
        on_rows: Callable[[list[CheckRow]], None] | None = None,
        on_wait: OnWait | None = None,
        on_env: Callable[[dict[str, Any]], None] | None = None) -> Report:
    """Run every check of every target; `on_rows` sees each batch of rows as it is made,
    `on_wait(label, seconds)` is called while an isolated item runs (a heartbeat), `on_env`
    gets the run's environment record once it is known.

    Isolated, this process imports no torch: the environment is the first worker's.  Ctrl-C
    (KeyboardInterrupt) stops the run: the rows made so far come back with
    `report.interrupted` set.
    """
    options = options or Options()
    report = Report()

    def known(env: dict[str, Any]) -> None:
        report.env = env
        if on_env is not None:
            on_env(env)

    caller = None
    if not options.isolate:
        from gradlab.envinfo import environment
        from gradlab.torchstate import TorchState

        caller = TorchState.now()
        known(environment(seed=options.seed))
    try:
        with executor(targets, options, on_wait, known) as execute:
            _run_all(targets, options, execute, report, on_rows)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        if caller is not None:
            caller.restore()  # the API hands the caller's settings back as it found them
    return report


#: execute(jobs) -> (index, item, rows) of each job of `jobs`, as each finishes.
Execute = Callable[[Iterator[tuple[int, Item, Options]]],
                   Iterator[tuple[int, Item, list[CheckRow]]]]


@contextmanager
def executor(targets: Sequence[Target], options: Options, on_wait: OnWait | None,
             on_env: Callable[[dict[str, Any]], None]) -> Iterator[Execute]:
    """How items run: here, or in worker processes (options.jobs of them, each running one
    item at a time) when options.isolate; on_env hears the first worker's environment."""
    if not options.isolate:
        from gradlab.checks.run.runner import item_rows
        from gradlab.torchstate import intra_op_threads

        def here(jobs: Iterator[tuple[int, Item, Options]]
                 ) -> Iterator[tuple[int, Item, list[CheckRow]]]:
            for index, item, opts in jobs:
                if on_wait is not None:
                    # no heartbeat can run beside an item in this process: one call as it
                    # starts (a log then says the op before is done, and the report is written)
                    on_wait(item_label(item), 0.0)
                yield index, item, item_rows(item, opts)

        with intra_op_threads(options.threads):
            yield here
        return
    workers = [Worker(targets, options) for _ in range(max(1, options.jobs))]
    # cases side by side share the memory one case may take alone (gradlab.guard)
    budget = default_limit() if len(workers) > 1 else None
    try:
        def execute(jobs: Iterator[tuple[int, Item, Options]]
                    ) -> Iterator[tuple[int, Item, list[CheckRow]]]:
            told = False
            for index, item, outcome in run_parallel(workers, jobs, options.timeout, on_wait,
                                                     item_label, item_bytes, budget, item_case):
                env = next((w.env for w in workers if w.env), None)
                if env is not None and not told:
                    told = True
                    on_env(env)
                yield index, item, outcome_rows(item, outcome, options.timeout)

        yield execute
    finally:
        stop_all(workers)


def outcome_rows(item: Item, outcome: Outcome, timeout: float | None) -> list[CheckRow]:
    """An isolated item's rows: its own, or those of a lost item (progress.py)."""
    if outcome.rows is not None:
        return outcome.rows
    if outcome.hint == "timeout_spent":
        return [not_run_row(item, timeout or 0.0)]
    reason = "time_limit" if outcome.hint == "timeout" else ""
    return lost_item_rows(item, outcome.hint, outcome.note, outcome.at, reason)


def item_case(item: Item) -> tuple[int, str, str]:
    """The case an item belongs to (its target, case and device): one --timeout for them."""
    return id(item[1]), item[2].name, item[4]


def item_bytes(item: Item) -> int:
    """The bytes an item's tensor specs need (gradlab.guard's estimate; 0 for API tensors)."""
    return case_bytes(item[2].args)


def item_label(item: Item) -> str:
    """'op/case dtype device' (what a heartbeat names)."""
    kind, t, case, dtype, device = item
    return f"{t.op.name}/{case.name} {dtype if kind == 'case' else 'numerical'} {device}"


def _run_all(targets: Sequence[Target], options: Options, execute: Execute, report: Report,
             on_rows: Callable[[list[CheckRow]], None] | None) -> None:
    """Every item, in plan order in the report whatever order they finish in (in parallel)."""
    start = time.perf_counter()
    failed_case: list[tuple[str, str]] = []  # --fail-fast: the first failing case
    spec_wrong: list[bool] = []  # a spec's own mistake (SPEC_INPUTS): the run stops

    def jobs() -> Iterator[tuple[int, Item, Options]]:
        # consulted each time a worker is free: the budget and fail-fast see every result in
        item_options = options
        for index, item in enumerate(plan(targets, options)):
            if spec_wrong:
                return
            if failed_case and failed_case[0] != (item[1].op.name, item[2].name):
                report.stopped = True
                return
            elapsed = time.perf_counter() - start
            if options.budget is not None:
                if elapsed > options.budget:
                    report.truncated = True
                    return
                if options.mode == "auto" and elapsed > BUDGET_FAST_FRACTION * options.budget:
                    # Half the budget gone: cheap random probes instead of dense Jacobians.
                    item_options = replace(options, mode="fast")
            yield index, item, item_options

    done: dict[int, list[CheckRow]] = {}
    told = 0  # on_rows hears the items in plan order (a log's per-op lines count on it)
    try:
        for index, item, rows in execute(jobs()):
            done[index] = rows
            while on_rows is not None and told in done:
                on_rows(done[told])
                told += 1
            if any(r.reason == SPEC_INPUTS for r in rows):
                spec_wrong.append(True)
            if options.fail_fast and not failed_case and any(r.failed for r in rows):
                failed_case.append((item[1].op.name, item[2].name))
    finally:
        for index in sorted(done):
            report.extend(done[index])
