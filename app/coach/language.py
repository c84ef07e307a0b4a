"""Which of the course's languages a question is written in (en, tr, pt-BR), from its words.

Small and deterministic: letters only one language uses (Turkish ğ ı ş, Portuguese ã õ) and each
language's most common short words. Too little to tell (a bare function name, one word) is None,
and the coach answers in the page's language.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

# Each language's commonest short words; words two languages share ("a", "de") are left out.
STOP_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        [
            "the",
            "what",
            "why",
            "how",
            "is",
            "are",
            "does",
            "do",
            "did",
            "an",
            "my",
            "of",
            "to",
            "in",
            "it",
            "this",
            "that",
            "for",
            "with",
            "me",
            "give",
            "answer",
            "can",
            "not",
            "fail",
            "failed",
            "when",
            "which",
            "where",
            "who",
            "you",
            "your",
            "i",
            "am",
            "was",
            "were",
            "be",
            "just",
            "there",
            "their",
            "they",
            "about",
            "from",
            "should",
            "would",
            "could",
            "mean",
            "means",
            "still",
            "stuck",
            "help",
            "please",
            "tell",
            "show",
            "write",
            "code",
            "line",
        ]
    ),
    "tr": frozenset(
        [
            "ne",
            "neden",
            "niye",
            "niçin",
            "nasıl",
            "bu",
            "bir",
            "mi",
            "mı",
            "mu",
            "mü",
            "için",
            "ve",
            "ile",
            "değil",
            "var",
            "yok",
            "nedir",
            "hangi",
            "bana",
            "benim",
            "şu",
            "olur",
            "oluyor",
            "ama",
            "gibi",
            "kodu",
            "kodum",
            "cevabı",
            "cevap",
            "söyle",
            "ver",
            "yaz",
            "yazar",
            "mısın",
            "misin",
            "hala",
            "hâlâ",
            "takıldım",
            "yardım",
            "satır",
            "satırı",
            "demek",
            "yarar",
            "işe",
            "neyi",
            "nerede",
            "başarısız",
            "oldu",
            "olmuyor",
            "çalışmıyor",
            "hata",
            "hatası",
            "sadece",
            "lütfen",
        ]
    ),
    "pt-BR": frozenset(
        [
            "o",
            "os",
            "as",
            "que",
            "é",
            "do",
            "da",
            "dos",
            "das",
            "em",
            "no",
            "na",
            "nos",
            "nas",
            "um",
            "uma",
            "por",
            "para",
            "porque",
            "como",
            "qual",
            "quais",
            "não",
            "meu",
            "minha",
            "isso",
            "este",
            "esta",
            "essa",
            "esse",
            "faz",
            "serve",
            "me",
            "dê",
            "resposta",
            "está",
            "são",
            "com",
            "mais",
            "você",
            "falhou",
            "falha",
            "erro",
            "errado",
            "ainda",
            "ajuda",
            "dica",
            "linha",
            "significa",
            "só",
            "código",
            "escreva",
            "mostre",
            "diga",
            "travado",
            "funciona",
        ]
    ),
}
_LETTERS = {"tr": re.compile(r"[ğış]"), "pt-BR": re.compile(r"[ãõâêôà]")}


def words_of(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def detect(text: str) -> str | None:
    """The language `text` is written in, if it is clearly one of ours; else None."""
    words = words_of(text.replace("İ", "i").replace("I", "ı") if _turkish_i(text) else text)
    scores = {locale: sum(word in stop for word in words) for locale, stop in STOP_WORDS.items()}
    lowered = text.lower()
    for locale, letters in _LETTERS.items():
        scores[locale] += 2 * len(letters.findall(lowered))
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    (best, top), (_, second) = ranked[0], ranked[1]
    if top >= 2 and top > second:
        return best
    return None


def _turkish_i(text: str) -> bool:
    """Turkish capitals: 'İ' lowers to 'i' and 'I' to 'ı' (Python's lower() does not know)."""
    return "İ" in text or bool(re.search(r"[ğış]", text.lower()))
