"""A rank's stack as a learner reads it (issue 38): Python tracebacks and faulthandler dumps with
the learner's frames first and no server path or grader frame.

- The learner's file is `main.py` (its base name); a library's file is named from its package
  (`torch/distributed/distributed_c10d.py`, not the server's `.venv/lib/python3.11/site-packages/`
  path); the standard library's from its own root (`threading.py`).
- The grader's frames (`grader/harness/...`, `grader/inside/...`: the hooks around a collective,
  the process that forked the rank) are left out, and so are the frames that called the learner's
  `<module>` (runpy, the harness).
- A dump (most recent call first) keeps the threads that ran the learner's code, each with the
  learner's frames first, then the library frames they called; a dump with no learner frame keeps
  its library frames. Thread ids and faulthandler's "Extension modules: ..." list go.
- A traceback (most recent call last) keeps its order and its source lines.

Imported by the rank's harness (its own tracebacks) and by the judge (the Result's stacks): the
standard library only.
"""

from __future__ import annotations

import os
import re

_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<file>[^"]+)", line (?P<line>\d+)(?P<rest>.*)$')
_THREAD = re.compile(
    r"^(?P<kind>Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):\s*$"
)
_GRADER = re.compile(r"(^|/)grader/|(^|/)rank_shim\.py$")
_SITE = re.compile(r"^.*/(?:site|dist)-packages/")
_STDLIB = re.compile(r"^.*/lib/python3(?:\.\d+)?/")
# An absolute path elsewhere in a line (an error message): the same shortening.
_PATH_IN_TEXT = re.compile(r"(?<![\w.])/(?:[\w.+@-]+/)+(?:site|dist)-packages/")
_STDLIB_IN_TEXT = re.compile(r"(?<![\w.])/(?:[\w.+@-]+/)*lib/python3(?:\.\d+)?/")


def short_path(path: str, learner_file: str | None = None) -> str:
    """A frame's file as the learner should read it (see the module's docstring)."""
    if learner_file and (path == learner_file or path == os.path.basename(learner_file)):
        return os.path.basename(learner_file)
    site = _SITE.sub("", path)
    if site != path:
        return site
    stdlib = _STDLIB.sub("", path)
    if stdlib != path:
        return stdlib
    return os.path.basename(path) if os.path.isabs(path) else path


def is_grader_frame(path: str) -> bool:
    return bool(_GRADER.search(path))


def scrub_text(line: str, learner_file: str | None = None) -> str:
    """Server paths inside a line that is no frame (an error message)."""
    if learner_file:
        line = line.replace(learner_file, os.path.basename(learner_file))
    return _STDLIB_IN_TEXT.sub("", _PATH_IN_TEXT.sub("", line))


def _frame_line(match: re.Match[str], learner_file: str | None) -> str:
    name = short_path(match["file"], learner_file)
    return f'{match["indent"]}File "{name}", line {match["line"]}{match["rest"]}'


def _is_learner(path: str, learner_file: str | None) -> bool:
    if learner_file:
        return path in (learner_file, os.path.basename(learner_file))
    return os.path.basename(path) == "main.py"


def _clean_thread(frames: list[re.Match[str]], learner_file: str | None) -> tuple[list[str], bool]:
    """One dumped thread's frames (most recent call first): the learner's first, then the
    library frames inside them; whether any was the learner's."""
    mine = [i for i, f in enumerate(frames) if _is_learner(f["file"], learner_file)]
    if mine:
        frames = frames[: mine[-1] + 1]  # what called the learner's <module> is plumbing
    kept = [f for f in frames if not is_grader_frame(f["file"])]
    learner = [f for f in kept if _is_learner(f["file"], learner_file)]
    others = [f for f in kept if not _is_learner(f["file"], learner_file)]
    return [_frame_line(f, learner_file) for f in learner + others], bool(learner)


def _clean_dump(lines: list[str], learner_file: str | None) -> list[str]:
    """A faulthandler dump: its header lines, then the threads worth showing."""
    head: list[str] = []
    threads: list[tuple[str, list[re.Match[str]]]] = []
    for line in lines:
        thread = _THREAD.match(line)
        frame = _FRAME.match(line)
        if thread:
            threads.append((f"{thread.group('kind')} (most recent call first):", []))
        elif frame and threads:
            threads[-1][1].append(frame)
        elif line.startswith("Extension modules:") or not line.strip():
            continue
        elif not threads:
            head.append(scrub_text(line, learner_file))
    cleaned = [(title, *_clean_thread(frames, learner_file)) for title, frames in threads]
    with_learner = [c for c in cleaned if c[2]]
    shown = with_learner or [c for c in cleaned if c[1]]
    out = list(head)
    for title, frames, _ in shown:
        out += [title, *frames]
    return out


def _clean_traceback(lines: list[str], learner_file: str | None) -> list[str]:
    out: list[str] = []
    skip_source = False
    for line in lines:
        frame = _FRAME.match(line)
        if frame:
            skip_source = is_grader_frame(frame.group("file"))
            if not skip_source:
                out.append(_frame_line(frame, learner_file))
            continue
        if skip_source and line.startswith("    "):
            continue
        skip_source = False
        out.append(scrub_text(line, learner_file))
    return out


def learner_stack(stack: str | None, learner_file: str | None = None) -> str | None:
    """The stack (tracebacks and dumps, one after the other) as a learner reads it."""
    if not stack:
        return stack
    parts: list[list[str]] = []
    dump = False
    for line in stack.splitlines():
        starts_dump = bool(_THREAD.match(line)) or line.startswith("Fatal Python error:")
        starts_traceback = line.startswith("Traceback (most recent call last):")
        if not parts or (starts_dump and not dump) or starts_traceback:
            parts.append([])
            dump = starts_dump
        parts[-1].append(line)
    out: list[str] = []
    for part in parts:
        is_dump = any(_THREAD.match(line) for line in part)
        cleaned = (
            _clean_dump(part, learner_file) if is_dump else _clean_traceback(part, learner_file)
        )
        if cleaned:
            if out:
                out.append("")
            out += cleaned
    return "\n".join(out).strip("\n") or None
