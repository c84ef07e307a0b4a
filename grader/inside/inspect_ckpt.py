"""Post-run checkpoint inspection, inside the sandbox (a checkpoint is a pickle: never on the host).

Follows every checkpoint rank 0 (or anyone) saved through its renames to where it ended up, loads
each final file with `weights_only=True` and describes it as plain JSON: which state dicts it
holds and whether they fit the bare model that DDP wrapped.
"""

from __future__ import annotations

import os
from typing import Any

from grader.events import DdpInit, Rename, Save, parse_all, parse_kinds

MAX_FILES = 8
MAX_BYTES = 256 * 1024 * 1024


def final_paths(traces: dict[int, list[dict[str, Any]]]) -> dict[str, str]:
    """saved path -> where the file is at the end (after os.replace/os.rename), by time order."""
    events = sorted(
        (e for evs in traces.values() for e in parse_kinds(evs, Save, Rename)),
        key=lambda e: e.t,
    )
    where: dict[str, str] = {}
    for e in events:
        if isinstance(e, Save) and e.ok and e.path:
            where[e.path] = e.path
        elif isinstance(e, Rename) and e.src and e.dst:
            for saved, now in list(where.items()):
                if now == e.src:
                    where[saved] = e.dst
    return where


def _bare_model(traces: dict[int, list[dict[str, Any]]]) -> dict[str, list[int]] | None:
    """The shapes of the first model rank 0 wrapped in DDP (None: none, or not described)."""
    inits = parse_all(DdpInit, traces.get(0, []))
    return inits[0].shapes if inits else None


def describe(
    obj: Any, bare: dict[str, list[int]] | None, depth: int = 0, where: str = ""
) -> list[dict[str, Any]]:
    import torch

    found: list[dict[str, Any]] = []
    if depth > 3:
        return found
    if isinstance(obj, dict):
        if (
            obj
            and all(isinstance(k, str) for k in obj)
            and any(isinstance(v, torch.Tensor) for v in obj.values())
        ):
            keys = list(obj)
            entry: dict[str, Any] = {
                "where": where or "(the saved object)",
                "n": len(keys),
                "sample": keys[:5],
            }
            if bare is not None:
                entry["loadable"] = set(keys) == set(bare) and all(
                    list(getattr(obj[k], "shape", [])) == bare[k] for k in keys
                )
                entry["prefixed"] = sum(k.startswith("module.") for k in keys)
                entry["compiled_prefixed"] = sum("_orig_mod." in k for k in keys)
            found.append(entry)
        for k, v in list(obj.items())[:200]:
            if isinstance(v, (dict, list, tuple)):
                found += describe(v, bare, depth + 1, f"{where}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:50]):
            found += describe(v, bare, depth + 1, f"{where}[{i}]")
    return found


def inspect_checkpoints(traces: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    import torch

    bare = _bare_model(traces)
    out: dict[str, Any] = {}
    cwd = os.getcwd()
    finals = sorted(set(final_paths(traces).values()))
    for path in finals[:MAX_FILES]:
        if not path.startswith(cwd + os.sep) or not os.path.isfile(path):
            out[path] = {"exists": False}
            continue
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            out[path] = {"exists": True, "size": size, "error": "too large to inspect"}
            continue
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            out[path] = {
                "exists": True,
                "size": size,
                "error": f"{type(exc).__name__}: {exc}"[:500],
            }
            continue
        out[path] = {
            "exists": True,
            "size": size,
            "type": type(obj).__name__,
            "state_dicts": describe(obj, bare),
        }
    return out
