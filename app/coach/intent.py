"""What kind of question the learner asked, in en, tr or pt-BR, before anything is looked up.

- "give_answer": they want the solution written for them ("just give me the answer");
- "run_line": what a line or a message of their run means ("what does rank 1 line 78 mean");
- "why_failed": why their submission failed, or that they are still stuck;
- "concept": what something is or does ("what is a DistributedSampler for?");
- "other": none of these cues; retrieval decides between a concept and off-topic.

Patterns are matched on the lowered question; the first kind that matches, in that order, wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["give_answer", "run_line", "why_failed", "concept", "other"]

_PATTERNS: list[tuple[Kind, re.Pattern[str]]] = [
    (
        "give_answer",
        re.compile(
            r"\b(give|show|tell|write|send)\b.{0,20}\b(answer|solution|code|program)\b"
            r"|\bjust (give|tell|write|fix)\b|\bthe (whole|full|complete) (solution|code|answer)"
            r"|\bwhat is the (answer|solution)\b|\bdo it for me\b"
            r"|cevab[ıi]\s*(ver|söyle|yaz)|çözüm[üu]?\s*(ver|söyle|yaz|göster)|kodu?\s*(yaz|ver)"
            r"|doğru kod|tam kod|\bme (dê|dá|de|mostre|diga|passe)\b.{0,20}"
            r"\b(resposta|solução|solucao|código|codigo)\b"
            r"|\bescreva o código\b|código (pronto|completo)"
            r"|\b(a|qual é a) (resposta|solução)( certa| completa)?\??$"
        ),
    ),
    (
        "run_line",
        re.compile(
            r"\b(line|linha)\s*\d+|\bsat[ıi]r\s*\d+|\d+\.?\s*sat[ıi]r"
            r"|\bwhat does (this|that|the) (message|error|line|output|stack) mean"
            r"|\b(mesaj|hata|satır)\w* ne (demek|anlama)"
            r"|\bo que (significa|quer dizer) (esta|essa|a) (mensagem|linha|saída|saida|erro)"
        ),
    ),
    (
        "why_failed",
        re.compile(
            r"\bwhy\b.{0,40}\b(fail|wrong|error|not|doesn|didn|isn|hang|stuck|crash)|\bwhy did\b"
            r"|\bneden\b.{0,40}\w+d[ıiuü]\b|\bpor ?que\b.{0,40}\w+([oei]u|[aei]ram)\b"
            r"|\b(still|again) (stuck|failing|fails|wrong|broken)|\bstuck\b|\bhint\b|\bhelp\b"
            r"|\bwhat('s| is) wrong\b|\bhow (do i|to|can i) fix\b|\bdoesn'?t work\b"
            r"|neden\b.{0,40}(başarısız|hata|olmu|çalışm|yanlış|geçm|kal)|niye|niçin"
            r"|hala takıl|hâlâ takıl|takıldım|ipucu|ne yanlış|nasıl düzelt|yardım"
            r"|por ?que\b.{0,40}(falh|err|não|trav)|ainda (estou )?(travad|falh|não)"
            r"|estou travad|\bdica\b"
            r"|o que (está|esta|tá) errado|como (eu )?(corrijo|conserto|arrumo)|não funciona|ajuda"
            r"|^(why|neden|por que)\??$"
        ),
    ),
    (
        "concept",
        re.compile(
            r"\bwhat('s| is| are| does| do)\b|\bexplain\b|\bhow does\b|\bdifference\b"
            r"|\bwhy (do|does|should|would|is|are)\b|\bwhen (do|should)\b"
            r"|\bhow (do i|to|can i) use\b"
            r"|nedir|ne işe yarar|ne yapar|açıkla|nasıl çalışır|farkı ne|neden gerek|ne zaman"
            r"|\bo que (é|faz|são)\b|\bo que .{0,30}\bfaz\b|\bqual\b|para que serve"
            r"|expli(que|ca)|como funciona|diferença"
            r"|\bquando (devo|usar)\b|\bpor que (usar|preciso)\b"
        ),
    ),
]


@dataclass(frozen=True)
class Intent:
    kind: Kind
    rank: int | None = None  # "rank 1 line 78"
    line: int | None = None


_RANK = re.compile(r"\brank\s*(\d+)|(\d+)\.?\s*rank", re.IGNORECASE)
_LINE = re.compile(r"\b(?:line|linha|sat[ıi]r)\s*(\d+)|(\d+)\.?\s*sat[ıi]r", re.IGNORECASE)


def classify(question: str) -> Intent:
    lowered = " ".join(question.lower().split())
    kind: Kind = "other"
    for candidate, pattern in _PATTERNS:
        if pattern.search(lowered):
            kind = candidate
            break
    return Intent(kind, _number(_RANK, lowered), _number(_LINE, lowered))


def _number(pattern: re.Pattern[str], text: str) -> int | None:
    found = pattern.search(text)
    if found is None:
        return None
    return int(next(group for group in found.groups() if group is not None))
