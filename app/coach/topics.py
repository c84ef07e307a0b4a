"""Distributed-training topics the course names but does not teach, with the step nearest them.

A question about one of these gets an honest "the course does not teach this" and that step,
instead of lesson excerpts that merely share a word with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Untaught:
    name: str  # as practitioners write it, in every language
    lesson_id: str
    step_id: str


_TOPICS: list[tuple[re.Pattern[str], Untaught]] = [
    (re.compile(r"\bdeep ?speed\b"), Untaught("DeepSpeed", "syncbn-sharded-state", "zero-idea")),
    # FSDP2, its DTensor parameters and torch.distributed.checkpoint are taught (lesson 3's
    # fsdp-reshard exercise); building a device mesh for tensor parallelism is not.
    (
        re.compile(r"\bmegatron\b|device ?mesh"),
        Untaught("Megatron-LM / DTensor", "data-vs-model-parallelism", "pipeline-and-tensor"),
    ),
    (re.compile(r"\bhorovod\b"), Untaught("Horovod", "data-vs-model-parallelism", "all-reduce")),
    (
        re.compile(r"\brpc\b|distributed\.rpc"),
        Untaught("torch.distributed.rpc", "data-vs-model-parallelism", "model-parallelism"),
    ),
    (re.compile(r"\bslurm\b|\bsbatch\b"), Untaught("Slurm", "torchrun-launch", "multi-node")),
]


def untaught_topic(question: str) -> Untaught | None:
    lowered = question.lower()
    for pattern, topic in _TOPICS:
        if pattern.search(lowered):
            return topic
    return None
