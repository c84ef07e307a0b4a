"""Run the benchmarks: `python -m benchmarks [NAME ...] [-- OPTIONS]`.

Each benchmark is a module of this package with a `main(argv) -> int`; with no NAME all run.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    options = [a for a in argv if a.startswith("-")]
    found = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_")
    )
    unknown = sorted(set(names) - set(found))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {found}", file=sys.stderr)
        return 2
    status = 0
    for name in names or found:
        print(f"== {name}")
        status |= importlib.import_module(f"benchmarks.{name}").main(options)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
