"""init_process_group() without a backend, then a CPU all-reduce. Since torch 2.6 (PR 142216)
the default is the accelerator's backend alone where one is present: on a GPU host the group is
`cuda:nccl` only and the CPU all-reduce fails; on a CPU host it is gloo and the program ends."""

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group()
    total = torch.ones(4)
    dist.all_reduce(total)
    assert total.tolist() == [dist.get_world_size()] * 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
