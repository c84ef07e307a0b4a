"""Code of an exercise's solution inside a text: what `validate` refuses in a nudge (the coach's
first hint level must point at what to look at, not hand over the code) and what the coach's
guard builds on.

Code is compared without its spacing and without a trailing comment, so `(i+1)%N==0` is found in
`(i + 1) % N == 0  # step every N`. A solution line counts when it is long enough to say
something and the starter does not already hold it; a piece of inline code (`...`) counts when it
is part of such a line.
"""

from __future__ import annotations

import re

# Shorter code ("model.train()", "import os") gives nothing away by itself.
MIN_TELLING_CHARS = 14
MIN_SPAN_CHARS = 10
_INLINE = re.compile(r"`([^`\n]+)`")
_NAME = re.compile(r"^[\w.]+$")  # a bare (dotted) name: it names an API, it is no code


def squeeze(text: str) -> str:
    """Code compared without its spacing: `(i+1)%N==0` is `(i + 1) % N == 0`."""
    return "".join(text.split())


def strip_comment(line: str) -> str:
    """The line without its trailing comment (a `#` inside a string stays)."""
    quote: str | None = None
    for position, char in enumerate(line):
        if quote is None and char in "\"'":
            quote = char
        elif quote is not None and char == quote and line[position - 1] != "\\":
            quote = None
        elif quote is None and char == "#":
            return line[:position].rstrip()
    return line.rstrip()


def telling_lines(solution: str, *known: str) -> set[str]:
    """The solution's lines (squeezed, comment taken off) that say something and that none of
    the `known` texts (the starter, what the learner can read) already holds."""
    public = squeeze("\n".join(known))
    telling = set()
    for line in solution.splitlines():
        code = squeeze(strip_comment(line))
        if len(code) >= MIN_TELLING_CHARS and code not in public:
            telling.add(code)
    return telling


def solution_code_in(text: str, solution: str, starter: str) -> list[str]:
    """The solution's code that `text` holds: whole telling lines, and inline code that is part
    of one (`DistributedSampler(dataset, shuffle=False)` of `sampler = DistributedSampler(...)`)."""
    telling = telling_lines(solution, starter)
    flat = squeeze(text)
    found = {line for line in telling if line in flat}
    starter_code = squeeze(starter)
    for span in _INLINE.findall(text):
        code = squeeze(strip_comment(span))
        is_code = len(code) >= MIN_SPAN_CHARS and not _NAME.match(code)
        if is_code and code not in starter_code and any(code in line for line in telling):
            found.add(span.strip())
    return sorted(found)
