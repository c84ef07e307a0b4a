"""The check a model's answer passes before a learner sees it: it must not hand over the solution.

It judges code, not lines:
- a line of the solution file (its comment taken off, spacing ignored) that says something (long
  enough) and that the learner cannot already read (the starter, their own code, the exercise's
  prompt, the lesson's steps) refuses the answer wherever it appears;
- a code block of the answer that is a program for the exercise refuses it: one that sets up the
  process group, loops and cleans up (init + loop + cleanup), or whose tokens, every name
  renamed, match the solution's closely (another spelling of the same program).
Quoting the learner's own code, the starter or a lesson's snippet back is fine.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import textwrap
import tokenize
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from app.content.codeleak import squeeze, telling_lines

# A block this similar to the solution, and at least this share of its length, is the solution.
SIMILAR_RATIO = 0.6
SIMILAR_SHARE = 0.4
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)(?:^[ \t]*\1|\Z)", re.DOTALL | re.MULTILINE)
_INDENTED = re.compile(r"(?:^(?: {4}|\t)\S.*\n?(?:^(?: {4}|\t).*\n?|^\s*\n)*)", re.MULTILINE)


def code_blocks(answer: str) -> list[str]:
    """Every piece of code in the answer, whatever its shape: ``` and ~~~ fences (closed or
    not), indented blocks, and all of them joined (a program split over several blocks)."""
    fenced = [found.group(2) for found in _FENCE.finditer(answer)]
    indented = [
        textwrap.dedent(found.group(0)) for found in _INDENTED.finditer(_FENCE.sub("", answer))
    ]
    blocks = [block for block in fenced + indented if block.strip()]
    return [*blocks, "\n".join(blocks)] if len(blocks) > 1 else blocks


def open_fence_at(text: str) -> int | None:
    """Where a code fence that is not closed yet starts in `text` (a stream still writing it)."""
    start = None
    marker = ""
    position = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if start is None and stripped.startswith(("```", "~~~")):
            start, marker = position, stripped[:3]
        elif start is not None and stripped.startswith(marker):
            start = None
        position += len(line)
    return start


# Module names kept as they are when names are renamed: they say what the program calls.
_KEPT_NAMES = frozenset({"torch", "dist", "nn", "os", "optim", "DDP", "F", "mp", "time", "math"})


def code_tokens(code: str) -> list[str] | None:
    """The code's tokens with every local name renamed to `N` (attribute names after a dot,
    keywords and a few module names kept); None if it does not tokenize."""
    kept: list[str] = []
    previous = ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
                continue
            if token.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            text = token.string
            if token.type == tokenize.NAME and not (
                keyword.iskeyword(text) or previous == "." or text in _KEPT_NAMES
            ):
                text = "N"
            elif token.type == tokenize.STRING:
                text = "S"
            kept.append(text)
            previous = token.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return kept


def is_whole_program(code: str) -> bool:
    """Sets up the process group, loops (the training) and cleans up: a program, not a hint."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    called = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    loops = any(isinstance(node, ast.For | ast.While) for node in ast.walk(tree))
    return "init_process_group" in called and loops and "destroy_process_group" in called


@dataclass(frozen=True)
class SolutionGuard:
    telling: frozenset[str]  # squeezed solution lines the learner cannot read anywhere
    solution_tokens: tuple[str, ...]
    public: str  # squeezed text the learner can read: prompt, steps, starter, their code

    @classmethod
    def for_exercise(
        cls, solution: Path, starter: str, learner_code: str, public_text: str = ""
    ) -> SolutionGuard | None:
        try:
            text = solution.read_text(encoding="utf-8")
        except OSError:
            return None
        public = squeeze("\n".join((starter, learner_code, public_text)))
        telling = telling_lines(text, starter, learner_code, public_text)
        return cls(frozenset(telling), tuple(code_tokens(text) or ()), public)

    def leaked_lines(self, answer: str) -> list[str]:
        """The solution lines the answer holds, anywhere (a code block, inline code, prose)."""
        flat = squeeze(answer)
        return sorted(line for line in self.telling if line in flat)

    def refusal(self, answer: str) -> str | None:
        """Why the answer may not be shown, or None."""
        leaked = self.leaked_lines(answer)
        if leaked:
            return f"the answer holds {len(leaked)} line(s) of the solution file"
        for block in code_blocks(answer):
            if squeeze(block) in self.public:
                continue  # a snippet the learner can already read
            if is_whole_program(block):
                return "the answer holds a whole program (init, loop and cleanup)"
            tokens = code_tokens(block)
            if tokens and self.solution_tokens:
                share = len(tokens) / len(self.solution_tokens)
                if share >= SIMILAR_SHARE:
                    ratio = SequenceMatcher(None, tokens, self.solution_tokens, autojunk=False)
                    if ratio.ratio() >= SIMILAR_RATIO:
                        return "the answer holds the solution's code under other names"
        return None
