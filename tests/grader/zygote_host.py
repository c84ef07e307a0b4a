"""A process that holds a zygote and its rank server, as the supervisor does (tests/grader/
test_spares.py): `python -m tests.grader.zygote_host plain|harness`. Prints the server's socket
path; when its stdin closes, closes both and prints how many ranks the zygote forked.

`plain`: ranks run their file with runpy, no harness, nothing imported ahead (the shim, the server
and the zygote are under test). `harness`: what a supervisor does (the ranks' imports ahead, the
harness's entrypoint). A node agent's command (`-u -m grader.inside.multinode`) runs
`plain_node` in `plain` mode."""

from __future__ import annotations

import json
import os
import runpy
import sys

from grader.inside import zygote
from grader.inside.spares import serve


def plain(argv: list[str]) -> int:
    args = argv[argv.index("grader.harness") + 1 :]
    sys.argv = args
    try:
        runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def plain_node(argv: list[str]) -> int:
    """A node agent's stand-in: says what it was handed, ends with code 5."""
    print(json.dumps({"argv": argv, "env": dict(os.environ), "pid": os.getpid()}), flush=True)
    return 5


def main(mode: str) -> int:
    if mode == "plain":
        zygote.RUN_RANK = plain
        zygote.RUN_NODE = plain_node
    else:
        zygote.preload()
    forked = zygote.fork_zygote()
    server = serve(forked)
    if forked is None or server is None:
        print("no zygote", flush=True)
        return 1
    print(server.path, flush=True)
    sys.stdin.read()
    server.close()
    forked.close()
    print(forked.served, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
