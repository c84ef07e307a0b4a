"""Golden cases of the lesson 1, 3 and 4 exercises: tests/grader/exercises/<exercise>/<case>/,
each a learner program `main.py` and an `expected.json` (the schema: `Expected` in
tests/grader/golden.py)."""
