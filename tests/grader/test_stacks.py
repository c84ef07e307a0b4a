"""A rank's stack as a learner reads it (grader/stacks.py, issue 38): learner frames first, no
server path, no grader frame, no faulthandler module list."""

from __future__ import annotations

from grader.stacks import learner_stack

VENV = "/work/wt/x/.venv/lib/python3.11/site-packages"
STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11"
GRADER = "/work/wt/x/grader"

HUNG = f"""Thread 0x00007f1234567000 (most recent call first):
  File "{STDLIB}/threading.py", line 324 in wait
  File "{GRADER}/harness/tracer.py", line 88 in _flush_loop

Current thread 0x00007f89abcdef00 (most recent call first):
  File "{VENV}/torch/distributed/distributed_c10d.py", line 2806 in all_reduce
  File "{VENV}/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "{GRADER}/harness/hooks/dist.py", line 211 in all_reduce
  File "/work/main.py", line 45 in step
  File "/work/main.py", line 60 in main
  File "/work/main.py", line 64 in <module>
  File "{STDLIB}/runpy.py", line 88 in _run_code
  File "{GRADER}/harness/__main__.py", line 90 in run_learner
  File "{GRADER}/inside/zygote.py", line 300 in _serve
"""

FATAL = f"""Fatal Python error: Aborted

Current thread 0x00007f89abcdef00 (most recent call first):
  File "{VENV}/torch/distributed/distributed_c10d.py", line 2806 in all_reduce
  File "{GRADER}/harness/hooks/dist.py", line 211 in all_reduce
  File "/work/main.py", line 54 in main
  File "/work/main.py", line 70 in <module>
  File "{GRADER}/inside/zygote.py", line 300 in _serve

Extension modules: numpy._core._multiarray_umath, torch._C, torch._C._nn (total: 22)
"""

RAISED = f"""Traceback (most recent call last):
  File "main.py", line 45, in step
    dist.all_reduce(t)
  File "{VENV}/torch/distributed/c10d_logger.py", line 81, in wrapper
    return func(*args, **kwargs)
  File "{GRADER}/harness/hooks/dist.py", line 211, in all_reduce
    return real(tensor, *args, **kwargs)
RuntimeError: [{VENV}/torch/csrc/x.cpp] Timed out waiting 4000ms for recv operation
"""


def clean(text: str) -> str:
    out = learner_stack(text, "/work/main.py")
    assert out is not None
    for server in ("/work/", ".venv", "site-packages", "grader/", "pyenv", "0x0000"):
        assert server not in out, (server, out)
    return out


def test_a_hung_rank_s_dump_shows_its_frames_first_then_torch_s() -> None:
    lines = clean(HUNG).splitlines()
    assert lines == [
        "Current thread (most recent call first):",
        '  File "main.py", line 45 in step',
        '  File "main.py", line 60 in main',
        '  File "main.py", line 64 in <module>',
        '  File "torch/distributed/distributed_c10d.py", line 2806 in all_reduce',
        '  File "torch/distributed/c10d_logger.py", line 81 in wrapper',
    ]


def test_a_fatal_abort_keeps_its_error_and_drops_the_module_list() -> None:
    lines = clean(FATAL).splitlines()
    assert lines[0] == "Fatal Python error: Aborted"
    assert lines[2] == '  File "main.py", line 54 in main'
    assert not any("Extension modules" in line for line in lines)


def test_a_traceback_keeps_its_order_and_source_lines_without_grader_frames() -> None:
    text = clean(RAISED + "\n" + HUNG)
    lines = text.splitlines()
    assert lines[:5] == [
        "Traceback (most recent call last):",
        '  File "main.py", line 45, in step',
        "    dist.all_reduce(t)",
        '  File "torch/distributed/c10d_logger.py", line 81, in wrapper',
        "    return func(*args, **kwargs)",
    ]
    assert lines[5].startswith("RuntimeError: [torch/csrc/x.cpp] Timed out")
    assert "Current thread (most recent call first):" in lines
    assert learner_stack(None) is None and learner_stack("") == ""
