"""`make scale-test`: the compose stack for real (README "Running at scale").

Not collected by pytest (no test_ modules): `python -m tests.scale` drives it, after
scripts/scale/run.sh has an engine and base images ready.
"""
