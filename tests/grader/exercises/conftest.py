"""Golden cases of the lesson 1, 3 and 4 exercises: tests/grader/exercises/<exercise>/<case>/.

Each case is a learner program `main.py` and `expected.json`:
{"status": "pass" | "fail", "failed": [check ids that must fail], "passed": [check ids that must
pass], "contains": {check id: text its message must contain}}.
"""
