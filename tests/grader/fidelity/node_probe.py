"""Says, per rank, whether torch was imported before its first line, the process that forked it
(its node's zygote) and that one's parent (its node's agent)."""

import json
import os
import sys

ahead = "torch._dynamo" in sys.modules

import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
parent = os.getppid()
with open(f"/proc/{parent}/stat") as f:
    agent = int(f.read().rsplit(")", 1)[1].split()[1])
with open(f"/proc/{agent}/cmdline", "rb") as f:  # a fork keeps the command it was forked from
    agent_cmd = [part.decode() for part in f.read().split(b"\0") if part]
print(
    "NODE "
    + json.dumps(
        {
            "rank": dist.get_rank(),
            "ahead": ahead,
            "zygote": parent,
            "agent": agent,
            "agent_cmd": agent_cmd,
        }
    )
)
dist.destroy_process_group()
