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
    (
        re.compile(r"\bfsdp2?\b|fully ?sharded"),
        Untaught("FSDP", "syncbn-sharded-state", "fsdp2-and-dcp"),
    ),
    (re.compile(r"\bdeep ?speed\b"), Untaught("DeepSpeed", "syncbn-sharded-state", "zero-idea")),
    (
        re.compile(r"\bmegatron\b|\bdtensor\b|device ?mesh"),
        Untaught("Megatron-LM / DTensor", "data-vs-model-parallelism", "pipeline-and-tensor"),
    ),
    (re.compile(r"\bhorovod\b"), Untaught("Horovod", "data-vs-model-parallelism", "all-reduce")),
    (
        re.compile(r"\brpc\b|distributed\.rpc"),
        Untaught("torch.distributed.rpc", "data-vs-model-parallelism", "model-parallelism"),
    ),
    (re.compile(r"\bslurm\b|\bsbatch\b"), Untaught("Slurm", "torchrun-launch", "multi-node")),
    (
        re.compile(r"\bdcp\b|torch\.distributed\.checkpoint"),
        Untaught("torch.distributed.checkpoint", "syncbn-sharded-state", "fsdp2-and-dcp"),
    ),
]


def untaught_topic(question: str) -> Untaught | None:
    lowered = question.lower()
    for pattern, topic in _TOPICS:
        if pattern.search(lowered):
            return topic
    return None
