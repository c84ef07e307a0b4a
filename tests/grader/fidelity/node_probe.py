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
print(
    "NODE "
    + json.dumps({"rank": dist.get_rank(), "ahead": ahead, "zygote": parent, "agent": agent})
)
dist.destroy_process_group()
