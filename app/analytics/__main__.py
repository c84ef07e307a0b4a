"""`python -m app.analytics rebuild`: every analytics rollup and counter recomputed from the
source rows (progress events, submissions, drafts), for rows written outside the app (a
restore, an import, a hand fix), which recorded no domain event. It holds every partition of the
events meanwhile, so no consumer applies one half-way through; events still pending are applied
again afterwards, which changes nothing.

`python -m app.analytics drain`: apply every pending domain event now (no consumer running).
"""

from __future__ import annotations

import argparse
import sys
import time

from app.analytics import consumer, rollups
from app.db import unit_of_work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.analytics")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("rebuild", help="recompute the rollups from the source rows")
    commands.add_parser("drain", help="apply every pending domain event now")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with unit_of_work() as session:
        if args.command == "rebuild":
            consumer.hold_all(session)
            rollups.rebuild(session)
            done = "rebuilt the analytics rollups"
        else:
            done = f"applied {consumer.drain(session)} domain events"
    print(f"{done} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
