"""The two hand-overs to the sandbox's standard-library scripts are typed: the exec wrapper's
`ExecSpec` (grader/sandbox/_exec.py) and the keeper's `Order` (grader/sandbox/_keeper.py). Each
round-trips through its JSON, and anything else is refused, not half-read."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.sandbox._exec import ExecSpec
from grader.sandbox._keeper import Leftovers, Order
from grader.sandbox.process import EXEC_WRAPPER, wrapper_argv


def test_an_exec_spec_round_trips_and_the_wrapper_runs_it() -> None:
    spec = ExecSpec(
        argv=["/bin/sh", "-c", 'echo "$GREETING"'],
        env={"GREETING": "hello"},
        rlimits={"nofile": 64},
        parent=None,
    )
    assert ExecSpec.from_json(spec.to_json()) == spec
    done = subprocess.run(wrapper_argv(spec), capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "hello\n")


def test_the_wrapper_hands_on_no_ignored_or_blocked_signal() -> None:
    """Ignored and blocked signals survive exec: the wrapper clears both, whatever its starter
    held (here SIGQUIT and SIGINT ignored, as a thread in `system()` leaves them, and SIGUSR2
    blocked)."""
    spec = ExecSpec(argv=["/bin/cat", "/proc/self/status"], env={}, parent=None)
    starter = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGQUIT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n"
    )
    argv = [sys.executable, "-c", starter, *wrapper_argv(spec)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    status = dict(line.split(":\t", 1) for line in done.stdout.splitlines() if ":\t" in line)
    # The standard signals; 32 and 33 are glibc's own (its threads' cancel and setxid), out of a
    # Python program's reach, and a pytest-xdist worker holds 32 ignored.
    standard = (1 << 31) - 1
    assert int(status["SigIgn"], 16) & standard == 0, status["SigIgn"]
    assert int(status["SigBlk"], 16) & standard == 0, status["SigBlk"]


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"argv": []}',
        '{"argv": ["/bin/true"], "extra": 1}',
        '{"argv": ["/bin/true"], "rlimits": {"as": "lots"}}',
        '{"argv": ["/bin/true"], "rlimits": {"stack": 1}}',
        '{"argv": ["/bin/true"], "uid": "0"}',
        '{"argv": ["/bin/true"], "env": {"A": 1}}',
    ],
)
def test_a_bad_exec_spec_is_refused_before_anything_runs(text: str) -> None:
    with pytest.raises((ValueError, TypeError)):
        ExecSpec.from_json(text)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", str(EXEC_WRAPPER), text],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 125 and "rdv-sandbox: a bad spec" in done.stderr


def test_a_keeper_order_round_trips_and_garbage_is_no_order() -> None:
    left = Leftovers(pgid=42, cgroups=("/sys/fs/cgroup/x",), dirs=("/tmp/a", "/tmp/b"))
    for order in (Order("7", left), Order("7")):
        assert Order.from_line(order.to_line().decode()) == order
    for line in ("", "{}", "[1]", '{"ident": 7, "leftovers": null}', "not json"):
        assert Order.from_line(line) is None
    assert Order.from_line('{"ident": "7", "leftovers": {"pgid": "42"}}') is None
    assert Order.from_line('{"ident": "7", "leftovers": {"dirs": [1]}}') is None
