"""Which of the course's languages a question is written in (en, tr, pt-BR), from its words.

Small and deterministic: letters only one language uses (Turkish ğ ı ş, Portuguese ã õ), each
language's most common short words and the words learners use to ask (compared without diacritics:
"Hala anlamadim" is Turkish), and Turkish endings. A short question whose words belong to one
language only is that language; too little to tell (a bare function name) is None, and the coach
answers in the page's language.
"""

from __future__ import annotations

import re
import unicodedata

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


def _words(text: str) -> list[str]:
    return text.split()


# Words learners ask with, written without diacritics (compared folded).
ASKING_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        _words(
            """
            get understand hint clue faster slower wrong error crash hang hangs happened again
            explain solution fix which
            """
        )
    ),
    "tr": frozenset(
        _words(
            """
            anlamadim anlamiyorum anlayamadim hala hangi satirda satirinda satiri ipucu kod kodu
            cozum cozumu cevabi neden niye nicin yine tekrar olmadi calismadi gecmedi takildim
            nerede nerde hizli yavas yardim ver verir misin goster acikla anlat basarisiz oldu
            mu icin cozemedim cozer coz yerime bilmiyorum gecmedi
            """
        )
    ),
    "pt-BR": frozenset(
        _words(
            """
            nao entendi entendo ainda continuo travado travada dica codigo solucao passa passe
            manda mostra qual onde falhou falha errado erro porque linha ajuda rapido lento
            explica explique pra mim isto isso voce de novo funciona perdido perdida
            """
        )
    ),
}
_LETTERS = {"tr": re.compile(r"[ğış]"), "pt-BR": re.compile(r"[ãõêôà]")}
# Turkish verb and case endings ("anlamadım", "çalışmıyor", "satırda") on folded words.
_TURKISH_ENDING = re.compile(
    r"\w{2,}(madim|medim|miyor|muyor|miyorum|muyorum|amadim|emedim|dim|dik|misin|musun|"
    r"sinda|sinde|inda|inde|daki|deki)$"
)


def _turkish_i(text: str) -> bool:
    """Turkish capitals: 'İ' lowers to 'i' and 'I' to 'ı' (Python's lower() does not know)."""
    return "İ" in text or bool(re.search(r"[ğış]", text.lower()))


_SPECIAL = str.maketrans({"ı": "i", "İ": "i", "ø": "o", "ß": "ss"})


def fold(text: str) -> str:
    """Lowered (the Turkish way when the text is Turkish), without diacritics, ı as i, one
    space between words: what the lexicons are matched on."""
    lowered = (text.replace("İ", "i").replace("I", "ı") if _turkish_i(text) else text).lower()
    decomposed = unicodedata.normalize("NFKD", lowered.translate(_SPECIAL))
    bare = "".join(char for char in decomposed if not unicodedata.combining(char))
    bare = bare.replace("’", "'").replace("‘", "'")
    return " ".join(bare.split())


def words_of(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


_FOLDED_STOP = {
    locale: frozenset(fold(word) for word in words) | ASKING_WORDS[locale]
    for locale, words in STOP_WORDS.items()
}


def detect(text: str) -> str | None:
    """The language `text` is written in, if it is clearly one of ours; else None."""
    words = words_of(fold(text))
    scores = {locale: sum(word in stop for word in words) for locale, stop in _FOLDED_STOP.items()}
    scores["tr"] += sum(1 for word in words if _TURKISH_ENDING.fullmatch(word))
    lowered = text.lower()
    for locale, letters in _LETTERS.items():
        scores[locale] += 2 * len(letters.findall(lowered))
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    (best, top), (_, second) = ranked[0], ranked[1]
    if top >= 2 and top > second:
        return best
    # A short question: its words alone tell, when they belong to one language only.
    if top >= 1 and second == 0 and len(words) <= 4:
        return best
    return None
