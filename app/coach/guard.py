"""The check a model's answer passes before a learner sees it: no line of the solution file.

Quoting the learner's own code or the starter back is fine; a solution line that is in neither
would hand over the answer, so an answer holding one is not shown (the built-in coach answers).
"""

from __future__ import annotations

from pathlib import Path

# A solution line shorter than this ("model.train()", "import os") gives nothing away by itself.
MIN_TELLING_CHARS = 16


def telling_solution_lines(solution: Path, *allowed: str) -> set[str]:
    """The solution's lines that would give it away: long enough to say something, no comment,
    and not already in the starter or in the learner's own code."""
    try:
        text = solution.read_text(encoding="utf-8")
    except OSError:
        return set()
    known = {line.strip() for source in allowed for line in source.splitlines()}
    telling = set()
    for line in text.splitlines():
        stripped = line.strip()
        telling_size = len(stripped) >= MIN_TELLING_CHARS and not stripped.startswith("#")
        if telling_size and stripped not in known:
            telling.add(stripped)
    return telling


def leaked_lines(answer: str, telling: set[str]) -> list[str]:
    """The solution lines the answer holds, anywhere (a code block, inline code, prose)."""
    flat = " ".join(answer.split())
    return sorted(line for line in telling if " ".join(line.split()) in flat)
