"""The Rendezvous grader: runs a learner's program under torchrun in a sandbox and judges it.

Independent of `app/`: it takes a `contract.Job` and returns a `contract.Result`.
"""
