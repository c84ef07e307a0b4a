"""Says, per rank, whether torch was imported before its first line and what its parent runs."""

import json
import os
import sys

ahead = "torch._dynamo" in sys.modules

import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
    parent = f.read().split(b"\0")
print(
    "NODE "
    + json.dumps(
        {"rank": dist.get_rank(), "ahead": ahead, "parent": [p.decode() for p in parent if p]}
    )
)
dist.destroy_process_group()
