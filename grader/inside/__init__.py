"""What runs IN the sandbox, started by `python -m grader.inside.supervisor`: the supervisor
(torch's elastic launcher around the learner's ranks), the simulated multi-node agents, the rank
output tailer and the checkpoint inspection.

These modules import only `grader.launch.wire` (the types that cross the boundary),
`grader.harness` and `grader.events` (tests/grader/test_import_rules.py); the host side never
imports them.
"""
