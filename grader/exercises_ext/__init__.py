"""Checks and harness hooks for the exercises of lessons 1, 3 and 4 (issue 4).

Layout (everything here plugs into the grader core's extension points; nothing in the core
names these exercises):

- `harness.py`: `install(tracer)`, run in every rank by the one-line module
  `grader/harness/hooks/zz_exercises.py` (the core installs every module of that package).
  - `h_collectives.py`: every Python-level collective per rank with its call-site line, and the
    gradients around the first optimizer step of programs that average gradients by hand.
  - `h_modules.py`: SyncBatchNorm (conversion, the DDP wrap, running statistics; on CPU it runs
    as a local BatchNorm because torch refuses SyncBatchNorm on CPU) and ZeroRedundancyOptimizer
    (construction, consolidate_state_dict enter/exit, state_dict, what the saved state covers).
  - `h_launch.py`: the launcher's environment, writes to MASTER_ADDR/MASTER_PORT/RANK/...,
    `mp.spawn`, the arguments of `init_process_group`.
- `checks_*.py`: pure functions over the per-rank events of each run, registered by check id.
"""
