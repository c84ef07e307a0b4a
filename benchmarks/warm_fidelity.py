"""Cold against warm: every golden, red-team and exercise case graded both ways, verdicts compared.

    python -m benchmarks warm_fidelity [--sample=N] [--pool=K] [--only=SUBSTRING]

Cold: no pool (a fresh sandbox started with each launch, its supervisor importing torch before it
forks the zygote). Warm: a pool of K (default 3) sandboxes prepared ahead, their zygotes forked
before the job was known (grader/inside/zygote.py); a warm grading that no warm sandbox served
counts as a difference. Both fork their ranks; test_warm_fidelity.py compares forked ranks with
ranks spawned as torchrun spawns them. For each case: the status and the
failed check ids of both, less the ids its expected.json allows to fail either way
(`may_also_fail`: a race decides).
Prints each difference and a summary; exit status 1 when any case differs. `--sample=N` takes
every k-th case (N in all) for a quicker look. In `make test` the golden suites grade warm and
tests/grader/test_warm_fidelity.py grades a sample of them cold.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from grader.contract import Result
from grader.sandbox.pool import Pool

ROOT = Path(__file__).resolve().parent.parent


def verdict(result: Result, allowed: set[str]) -> tuple[str, frozenset[str]]:
    failed = {c.id for c in result.checks if c.status == "fail"} - allowed
    return result.status, frozenset(failed)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.grader.golden import SUITES, grade_case

    opts = dict(a.lstrip("-").split("=", 1) for a in argv if "=" in a)
    size = opts.get("pool", "3")
    cases = [c for suite in SUITES for c in suite.cases()]
    if "only" in opts:
        cases = [c for c in cases if opts["only"] in f"{c.suite.root.name}/{c.name}"]
    if "sample" in opts:
        step = max(1, len(cases) // max(1, int(opts["sample"])))
        cases = cases[::step]
    differ: list[str] = []
    started = time.monotonic()
    pool = Pool(int(size))
    for i, case in enumerate(cases, 1):
        allowed = set(case.expected.may_also_fail)
        # The pool lives on through the cold grading (no pool given: all launches cold), so the
        # warm grading of the same exercise finds its sandboxes ready.
        cold = verdict(grade_case(case), allowed)
        result = grade_case(case, pool)
        hot = verdict(result, allowed)
        launch = result.launch
        served = f"{launch.warm_launches} warm, {launch.spare_ranks} forked" if launch else "-"
        name = f"{case.suite.root.name}/{case.name}"
        same = cold == hot and (launch is None or launch.warm_launches > 0)
        if not same:
            differ.append(name)
        print(
            f"[{i}/{len(cases)}] {'same' if same else 'DIFFERS'} {name}: cold {cold[0]} "
            f"{sorted(cold[1])} | warm {hot[0]} {sorted(hot[1])} ({served}) "
            f"(load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
    pool.close()
    print(
        f"{len(cases)} cases graded cold and warm (prepared sandboxes of a pool of {size})"
        f" in {time.monotonic() - started:.0f} s: {len(differ)} differ"
        + (f": {differ}" if differ else "")
    )
    return 1 if differ else 0
