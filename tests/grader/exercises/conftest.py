"""Golden cases of the exercises other than ddp-fundamentals/train:
tests/grader/exercises/<exercise>/<case>/.

Each case is a learner program `main.py` and `expected.json`:
{"status": "pass" | "fail", "failed": [check ids that must fail], "passed": [check ids that must
pass], "contains": {check id: text its message must contain}, "world_sizes": [the sizes to grade
at, when not the spec's]}.
"""
