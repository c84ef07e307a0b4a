"""What each kind of question sounds like, per language (en, tr, pt-BR).

Patterns are matched on the *folded* question (app/coach/language.py `fold`: lowered the Turkish
way, diacritics taken off, ı as i), so "Hâlâ anlamadım" and "Hala anlamadim" are the same text to
them. Held against a paraphrase corpus (tests/coach/test_intent_corpus.py): at least 30 phrasings
per kind and language, each with and without its diacritics. Add a phrasing there first, then the
pattern here that hears it.
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal[
    "give_answer", "run_line", "still_stuck", "hint", "faster", "why_failed", "concept", "other"
]
# The order in which kinds are tried: the first that matches wins.
ORDER: tuple[Kind, ...] = (
    "give_answer",
    "still_stuck",
    "run_line",
    "hint",
    "faster",
    "why_failed",
    "concept",
)


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns))


# "Without giving me the answer": a hint, although the answer is named.
NOT_THE_ANSWER: dict[str, re.Pattern[str]] = {
    "en": _any(
        r"\b(without|not|no) (giving |telling |showing |spoiling )?(me )?"
        r"the (answer|solution|code)",
        r"\bnot the (answer|solution|code)\b",
    ),
    "tr": _any(r"(cevab|cozum|kod)\w* (vermeden|soylemeden|gostermeden|yazmadan)", r"ipucu ver"),
    "pt-BR": _any(
        r"\bsem (me )?(dar|contar|entregar|mostrar|passar|dizer) (a|o) (resposta|solucao|codigo)"
    ),
}
# A question with "why" in it that also asks for a hint is asking why it failed.
WHY: dict[str, re.Pattern[str]] = {
    "en": re.compile(r"\bwhy\b"),
    "tr": re.compile(r"\b(neden|niye|nicin)\b"),
    "pt-BR": re.compile(r"\bpor ?que\b"),
}

LEXICONS: dict[str, dict[Kind, re.Pattern[str]]] = {
    "en": {
        "give_answer": _any(
            r"\b(give|show|tell|write|send|paste|post|share)\b.{0,25}\b(answer|solution|code|"
            r"program|fixed version|correct version)\b",
            r"\bjust (give|tell|write|fix|do|solve)\b",
            r"\b(whole|full|complete|entire|working|correct|final|fixed|right) (solution|code|"
            r"program|answer|file)\b",
            r"\bwhat is the (answer|solution)\b",
            r"\b(do|solve|fix|write) (it|this|the exercise) for me\b",
            r"\bcan you (just )?(write|fix|solve|code) (it|this|the)",
            r"\bcode (it|this) for me\b",
            r"\bcopy.{0,10}(solution|answer)",
            r"\bthe (solution|answer)( please| pls)?\??$",
        ),
        "still_stuck": _any(
            r"\bstill\b.{0,25}\b(stuck|lost|confused|fail|failing|fails|broken|wrong|red|no idea|"
            r"same|not|don'?t|dont|doesn'?t|can'?t|cant)",
            r"\b(i )?(don'?t|do not|dont) (get|understand|follow|see) (it|this|that|what|why|how)",
            r"\bi (still )?(don'?t|do not|dont) (get|understand)\b",
            r"\b(didn'?t|did not|doesn'?t|does not|that didn'?t|not) help(ing|ed)?\b",
            r"\b(explain|say) (it|that|this)? ?(again|differently|another way)",
            r"\bi'?m (lost|confused)\b|\bi am (lost|confused)\b",
            r"\b(again|once more)\b.{0,15}\b(stuck|fail|failed|wrong|same)",
            r"\b(same|that) (error|failure|problem) again\b",
            r"\b(more|another|next) (help|detail|details|hint|step)\b",
            r"\bstill\??$|\bnot clear\b|\bmakes no sense\b|\bwhat now\b",
            r"\bi tried (that|it|this)\b",
        ),
        "run_line": _any(
            r"\bline\s*#?\d+",
            r"\b(which|what) line\b",
            r"\bwhere\b.{0,30}\b(error|fail|fails|failed|wrong|hang|hangs|stuck|crash|crashed|"
            r"problem|bug|stop|stopped|break|breaks)\b",
            r"\bwhat does (this|that|the|it|my)\b.{0,25}\bmean\b",
            r"\bmeaning of (this|that|the)\b",
            r"\b(this|that|the) (message|traceback|stack trace|stack|output|error message) "
            r"(mean|means|say|says|is saying)",
            r"\bwhat is (this|that) (error|message|traceback|output)\b",
            r"\bwhat is .{0,30} (telling|saying)\b",
        ),
        "hint": _any(
            r"\bhint\b|\bclue\b|\bnudge\b|\btips?\b",
            r"\bpoint me\b|\bpush in the right direction\b|\bright direction\b",
            r"\bwhere (should|do|can) i (start|begin|look)\b",
            r"\bwhat should i (look at|check|try|change first|focus on)\b",
            r"\b(a little|small|some) help\b",
            r"\bwithout (giving|telling) (me )?the answer\b",
        ),
        "faster": _any(
            r"\bfaster\b|\bquicker\b|\bspeed\b|\bslow\b|\bslower\b|\bperformance\b",
            r"\bthroughput\b|\bprofil(e|er|ing)\b|\bbottleneck\b|\boptimi[sz]e\b",
            r"\bhow (long|fast)\b|\btime per step\b",
            r"\b(check|measure|verify|see|know)\b.{0,25}\boverlap",
            r"\boverlap\b.{0,25}\b(working|happening|actually)",
        ),
        "why_failed": _any(
            r"\bwhy\b.{0,50}\b(fail|fails|failed|failing|wrong|error|not|doesn'?t|didn'?t|isn'?t|"
            r"won'?t|hang|hangs|stuck|crash|crashed|red|broke|broken)",
            r"\bwhy did\b|^why\??!?$|\bwhy does it say\b|\bout of sync\b|\bdiffer\b",
            r"\bwhat('?s| is| went) wrong\b|\bwhat happened\b",
            r"\bhow (do i|to|can i|should i|do we) fix\b|\bhow to make (it|this) pass\b",
            r"\b(doesn'?t|does not|won'?t|didn'?t|did not) (work|pass)\b",
            r"\bhelp\b|\bstuck\b|\bbroken\b",
            r"\b(it|this|my (code|program|run|submission)) (fails|failed|crashed|hangs|errors)",
            r"\bwhat('s| is) the (problem|issue|error)\b",
            r"\bexplain (the|this|my) (failure|error|result)\b",
        ),
        "concept": _any(
            r"\bwhat('s| is| are| does| do)\b|\bexplain\b|\bhow does\b|\bdifference\b",
            r"\bwhy (do|does|should|would|is|are)\b|\bwhen (do|should)\b",
            r"\bhow (do i|to|can i) use\b|\bmeaning\b|\bpurpose\b",
        ),
    },
    "tr": {
        "give_answer": _any(
            r"cevab\w*\s*(ver|soyle|yaz|goster|at|paylas)",
            r"cozum\w*\s*(ver|soyle|yaz|goster|at|paylas|nedir)",
            r"\bkod\w*\s*(yaz|ver|at|goster|paylas|yolla|gonder)",
            r"\b(dogru|tam|calisan|duzeltilmis|butun|hazir|son|eksiksiz) (kod|cozum|program|hal)",
            r"benim (icin|yerime) (yaz|coz|duzelt|yap)",
            r"(yazar|cozer|duzeltir|yapar|verir|gosterir) m[iu]s[iu]n",
            r"\bsen (yaz|coz|yap|duzelt)\b",
            r"\bcevap (ne|nedir)\b",
        ),
        "still_stuck": _any(
            r"\bhala\b.{0,30}(anla|takil|olmu|calism|gecm|ayni|hata|bilm|cozeme|basarisiz|yapam)",
            r"\b(anlamadim|anlayamadim|anlamiyorum|anlayamiyorum|cozemedim|cozemiyorum|"
            r"yapamadim|yapamiyorum|beceremedim)\b",
            r"\byine\b.{0,20}(olmadi|takil|hata|ayni|basarisiz|calismadi|gecmedi)",
            r"(ise yaramadi|yardimci olmadi|faydasi olmadi)",
            r"(daha|biraz daha) (fazla|acik|net|detayli)",
            r"(tekrar|yeniden|baska turlu) (acikla|anlat|soyle)",
            r"kafam karisti|kayboldum|hicbir sey anlamadim",
            r"\bhala\??$|\bhala mi\b|ayni hata",
            r"\bdenedim\b",
        ),
        "run_line": _any(
            r"\bsatir\w*\s*\d+|\d+\.?\s*satir|\d+'?\s*(inci|nci|uncu|ncu|ıncı) satir",
            r"hangi satir",
            r"\b(nerede|nerde|neresi|nereden)\b.{0,25}(hata|takil|kal|bozul|patl|durdu|sorun|"
            r"basarisiz)|(hata|sorun)\w* (nerede|nerde|neresi)",
            r"(mesaj|hata|satir|cikti|yigin|traceback)\w* ne (demek|anlama|diyor)",
            r"ne (demek|anlama geliyor|anlatiyor)",
            r"hangi (kisim|yer|nokta|fonksiyon)",
        ),
        "hint": _any(
            r"ipucu|ipucu ver|\bipu\b",
            r"(kucuk|biraz|az) (bir )?yardim",
            r"nereden (basla|baslamali)|nereye (bak|odaklan)|neye (bak|odaklan)",
            r"(bir )?fikir ver|yol goster|yon goster|dogru yone",
            r"nereyi kontrol|neyi kontrol|neyi degistir|ilk once neyi",
            r"cevabi (vermeden|soylemeden)",
        ),
        "faster": _any(
            r"(daha )?hizli|hizlan|yavas|performans|verim",
            r"profil|darbogaz|optimize|eniyile",
            r"adim basina (sure|zaman)|ne kadar (surer|suruyor|zaman)",
            r"ortus\w*\s*(olc|kontrol|dogrula|gor|anla)",
            r"ortus\w* .{0,20}(oluyor mu|var mi|calisiyor mu)",
            r"overlap\w*\s*(olc|kontrol|dogrula)",
        ),
        "why_failed": _any(
            r"\b(neden|niye|nicin)\b.{0,50}(basarisiz|hata|olm|calism|yanlis|gecm|kal|patl|dus|"
            r"takil|kirmizi|bozul|donu|bekl)",
            r"\bniye\b|\bnicin\b|^neden\??!?$|\bneden\b.{0,40}\w+d[iu]\b",
            r"takildim|takili kaldim|ne yanlis|yanlis ne|sorun ne|problem ne|hata ne",
            r"nasil (duzelt|cozer|gecer|hallederim|giderir)",
            r"yardim|calismiyor|olmuyor|gecmedi|basarisiz|patladi|donup kaldi|dondu",
            r"ne oldu|neler oldu",
        ),
        "concept": _any(
            r"nedir|ne ise yarar|ne yapar|acikla|nasil calisir|farki ne|neden gerek|ne zaman",
            r"ne demek|anlami ne|amaci ne|nicin kullan|neden kullan",
        ),
    },
    "pt-BR": {
        "give_answer": _any(
            r"\b(me )?(de|da|mostre|mostra|diga|diz|passe|passa|manda|mande|envia|envie|fala|"
            r"cola|escreve|escreva)\b.{0,25}\b(resposta|solucao|codigo|programa|gabarito)\b",
            r"\bescrev\w*\b.{0,15}\b(pra|para|por) mim\b",
            r"\b(codigo|programa|arquivo) "
            r"(pronto|completo|certo|corrigido|final|inteiro|funcionando)",
            r"\b(resposta|solucao) (certa|completa|pronta|inteira|final)\b",
            r"\b(faz|faca|fazer|resolve|resolva|resolver|corrige|corrija|conserta|arruma)\b.{0,15}"
            r"\b(pra|para|por) mim\b",
            r"\b(a|qual e a) (resposta|solucao)\??$|\bgabarito\b",
        ),
        "still_stuck": _any(
            r"\bainda\b.{0,30}(nao|travad|falh|perdid|confus|erro|mesm|sem entender)",
            r"\bnao (entendi|entendo|consegui|consigo|to entendendo|estou entendendo|sei o que)\b",
            r"\bcontinu\w*\b.{0,20}(travad|sem entender|perdid|falhando|erro|errado|igual|mesm)",
            r"\b(nao|nada) (ajudou|adiantou|resolveu|funcionou)\b",
            r"\bexpli[cq]\w*\b.{0,10}\b(de novo|melhor|outra vez|de outro jeito|diferente)",
            r"\b(de novo|outra vez|mais uma vez)\b.{0,20}(travad|falh|erro|mesm)",
            r"\b(estou|to|tou|fiquei) (perdid|confus)",
            r"\bmais (ajuda|detalhes|explicacao)\b|\bainda\??$|\btentei\b",
        ),
        "run_line": _any(
            r"\blinha\s*\d+|\bna \d+",
            r"\b(qual|que|em que|em qual|de qual) linha\b",
            r"\bonde\b.{0,30}(erro|falh|trav|problema|quebr|parou|para|bug)",
            r"\bo que (significa|quer dizer|diz)\b",
            r"\b(essa|esta|a|aquela) (mensagem|saida|linha|stack|pilha|traceback)\b",
        ),
        "hint": _any(
            r"\bdica\b|\bpista\b|\bempurraozinho\b",
            r"\bpor onde (comeco|comecar|eu comeco)\b",
            r"\bonde (devo|eu devo|eu) (olhar|olho|comecar)\b",
            r"\bme (da|de|dá) uma (luz|ajudinha|ideia)\b|\buma luz\b",
            r"\bo que (devo|eu devo|preciso) (olhar|verificar|checar|mudar primeiro|testar)\b",
            r"\bsem (me )?(dar|contar|entregar) a resposta\b",
        ),
        "faster": _any(
            r"\bmais rapido\b|\bacelerar\b|\blento\b|\blentidao\b|\bdesempenho\b|\bperformance\b",
            r"\bprofil\w*\b|\bgargalo\b|\botimiz\w*\b|\bvazao\b",
            r"\btempo (por|de cada) passo\b|\bquanto tempo\b|\bvelocidade\b",
            r"\b(medir|verificar|checar|conferir|saber|ver)\b.{0,30}\bsobreposi",
            r"\b(medir|verificar|checar|conferir|saber|ver)\b.{0,30}\boverlap",
            r"\bsobreposicao\b.{0,25}\b(funciona|acontece|mesmo)",
        ),
        "why_failed": _any(
            r"\bpor ?que\b.{0,70}(falh|err|nao|trav|quebr|deu|reprov|vermelh|parou)",
            r"^por ?que\??!?$|\bporque falhou\b|\bpor ?que\b.{0,40}\w+([oei]u|[aei]ram)\b",
            r"\bo que (esta|ta|deu|houve|aconteceu)( de)? errado\b|\bo que aconteceu\b",
            r"\bcomo (eu )?(corrijo|conserto|arrumo|resolvo|passo|faco passar)\b",
            r"\bnao (funciona|passa|passou|roda|rodou)\b|\bajuda\b|\btravad",
            r"\b(falhou|falha|deu erro|quebrou|travou|reprovou)\b",
            r"\bqual (e |foi )?o (erro|problema)\b",
        ),
        "concept": _any(
            r"\bo que (e|faz|sao)\b|\bo que .{0,30}\bfaz\b|\bqual\b|\bpara que serve\b",
            r"\bexpli(que|ca|car)\b|\bcomo funciona\b|\bdiferenca\b",
            r"\bquando (devo|usar)\b|\bpor que (usar|preciso|devo)\b|\bpra que serve\b",
        ),
    },
}
