"""run.completed names the real cause of a store-connection timeout (a worker sent to an address
where no store runs), and keeps the collective-timeout report for ranks that met no peer."""

from __future__ import annotations

from tests.grader.test_checks import end, ev, judge, run_of, start

# What torch 2.13 raises from init_process_group under torchrun for a hard-coded
# init_method="tcp://127.0.0.1:29512" (tests/grader/test_torchrun_behaviour.py runs it).
STORE_TIMEOUT = (
    "The client socket has timed out after 5000ms while trying to connect to (127.0.0.1, 29512)."
)


def test_a_store_connection_timeout_names_the_store_not_the_collectives() -> None:
    crash = ev("exception", t=5.0, type="DistStoreError", message=STORE_TIMEOUT, line=48)
    run = run_of([start(0), crash, end("exception")])
    out = judge("run.completed", run)
    assert (out.status, out.rank, out.line) == ("fail", 0, 48)
    assert "connecting to the process group's store" in out.message
    assert "env://" in out.message
    assert "same collectives in the same order" not in out.message


def test_a_collective_timeout_still_names_where_each_rank_waited() -> None:
    waited = ev("exception", t=9.0, type="DistBackendError", message="Timed out waiting", line=30)
    run = run_of([start(0), waited, end("exception")], [start(1), end()])
    out = judge("run.completed", run)
    assert out.status == "fail"
    assert "same collectives in the same order" in out.message
    assert "rank 1 had finished" in out.message
