"""The torch internals the harness reads, which hooks read them and which checks depend on them.

The grader is pinned to one torch (requirements.lock), but a GPU worker may carry another (the
lent GPU machines have their own build). Where a torch lacks an internal named here, the harness
leaves out the hooks that read it (`grader.harness.compat` probes each one in the rank, before the
learner's code runs) and the checks judged from those hooks become "not judged" with the reason
(`grader.stages.not_judged_on_this_torch`), instead of failing a learner or the platform.

Data only: the host side imports it without torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Internal:
    key: str  # its probe in grader.harness.compat.PROBES
    name: str  # as the learner-facing reason names it
    hooks: tuple[str, ...]  # modules of grader/harness/hooks that read it
    checks: tuple[str, ...]  # checks judged from what those hooks record


INTERNALS: tuple[Internal, ...] = (
    Internal(
        key="dataloader_iterator",
        name="DataLoader's iterator attributes _sampler_iter and _index_sampler",
        hooks=("data",),
        checks=("sampler.shards", "sampler.set_epoch"),
    ),
    Internal(
        key="zero_optimizer",
        name="ZeroRedundancyOptimizer's attributes _optim_constructor, _optim_defaults, "
        "_param_to_index and _all_params",
        hooks=("zero",),
        checks=("zero.optimizer", "zero.consolidated", "zero.state_complete", "zero.loadable"),
    ),
)

BY_KEY = {internal.key: internal for internal in INTERNALS}


def hooks_left_out(missing: list[str]) -> set[str]:
    """The hook modules not to install when the internals keyed in `missing` are absent."""
    return {hook for key in missing if key in BY_KEY for hook in BY_KEY[key].hooks}


def checks_not_judged(missing: list[str]) -> dict[str, str]:
    """check id -> the name of the missing internal it depends on."""
    return {
        check: BY_KEY[key].name for key in missing if key in BY_KEY for check in BY_KEY[key].checks
    }
