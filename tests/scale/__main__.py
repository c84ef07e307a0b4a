"""`python -m tests.scale`: build, bring up and exercise the compose stack; one line per stage
with its time, then a summary line. Exit 0 only if every stage passed. The engine and the base
images come first (scripts/scale/run.sh)."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable

from tests.scale import stages
from tests.scale.stack import Stack


def main() -> int:
    stack = Stack()
    timings: list[tuple[str, float, str]] = []
    started = time.monotonic()
    failed = None
    plan: list[tuple[str, Callable[[Stack], str]]] = [
        ("build", stages.build),
        ("up", stages.up),
        ("grade", stages.grade_correct_and_wrong),
        ("containment", stages.containment),
        ("worker-kill", stages.kill_worker_mid_job),
        ("scale-out", stages.scale_out),
    ]
    try:
        for name, stage in plan:
            t0 = time.monotonic()
            print(f"[scale] {name} ...", flush=True)
            try:
                note = stage(stack)
            except Exception:
                traceback.print_exc()
                for service in ("web", "grader-cpu"):
                    print(stack.logs(service)[-4000:])
                failed = name
                timings.append((name, time.monotonic() - t0, "FAILED"))
                print(f"[scale] {name} FAILED after {time.monotonic() - t0:.1f} s", flush=True)
                break
            timings.append((name, time.monotonic() - t0, note))
            print(f"[scale] {name} ok in {time.monotonic() - t0:.1f} s: {note}", flush=True)
    finally:
        t0 = time.monotonic()
        stack.down()
        timings.append(("down", time.monotonic() - t0, "stack removed"))
        print(f"[scale] down in {time.monotonic() - t0:.1f} s", flush=True)
    total = time.monotonic() - started
    parts = ", ".join(f"{name} {seconds:.0f}s" for name, seconds, _ in timings)
    verdict = "FAILED at " + failed if failed else "PASSED"
    print(f"[scale] scale-test {verdict} in {total:.0f} s ({parts})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
