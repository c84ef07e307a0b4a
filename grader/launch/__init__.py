"""The host side of a launch: what runs in the grading process around one sandbox.

- `plan`: which launches a grading makes (`Launch`, `plan_launches`, the GPUs this worker owns);
- `faults`: where a faulted launch's injected faults are placed, from its uninterrupted twin;
- `host`: one launch run (`run_launch`: job dir, sandbox request, framed output -> events,
  the supervisor's report -> `RunView`);
- `wire`: the types that cross the sandbox boundary, the only module `grader.inside` imports
  from here.

Host modules never import `grader.inside` (tests/grader/test_import_rules.py).
"""
