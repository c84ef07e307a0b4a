"""Golden cases of every exercise but ddp-fundamentals/train:
tests/grader/exercises/<exercise>/<case>/, each a learner program `main.py` and an
`expected.json` (the schema: `Expected` in tests/grader/golden.py)."""
