"""Markup in a query: the words that belong to its form (HTML, Markdown, file names), not its subject.

Users paste markup into questions (`表格里怎么用<br>换行`, `&nbsp;怎么去掉`, `config.yaml放在哪`). The
analyzer turns it into Latin words (`br`, `nbsp`, `yaml`) that a Chinese KB rarely holds as words —
its loaders strip tags from the documents, and file types are named in prose if at all — so lexical
support must not read them as names the KB never mentions (the out-of-vocabulary veto) nor as
content terms the candidates lack. Markup words, exactly (on the NFKC, lower-cased query):

- every word inside an HTML/XML tag: `<br>`, `</td>`, `<img src="a.png">` (tag and attribute names
  and values) — a `<` that opens no tag (`a<b`, `$<`) is no tag — and inside a `<script>` or
  `<style>` element (code, which the HTML loader drops with the element);
- every word inside a BBCode or Rich console tag with a known name (`[b]`, `[/url]`,
  `[link=http://x]`, `[bold red]`); the text between the tags stays prose;
- the name of an HTML entity: `&nbsp;`, `&lt;`, `&#160;` (the semicolon may be left out of
  `&nbsp`, `&lt`, `&gt`, `&amp`, `&quot`, `&apos`);
- a URL scheme: `https` in `https://…` (the host and path stay words);
- a file extension: the letters after the last dot of a file name (`yaml` in `config.yaml`, `h` in
  `math.h`, `xz` in `tar.xz`): 1–5 characters starting with a letter, after a word character and
  not followed by a letter, digit, `_`, `-` or another dotted part (`utf-8`, `v2.4.0` and `.bashrc`
  are no extensions; the file's own name, `config`, stays a word);
- the info string of a Markdown code fence (`bash` in ```` ```bash ````).

Markdown emphasis, headings and quotes (`**`, `#`, `>`) yield no word at all. Words inside inline
code (`` `systemctl` ``) stay words: a command in backticks names what is asked about. A word that
also occurs outside markup in the same query (`table标签 <table>`) is no markup word.
"""

from __future__ import annotations

import re

from ragtriage.index.analyzer import normalize_text, tokenize

__all__ = ["markup_words"]

_LATIN_LETTER = re.compile(r"[a-z]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

#: BBCode and Rich console tags (`[b]`, `[/url]`, `[color=red]`, `[bold red]`): only these names, so
#: a Markdown link's text (`[文档](url)`) or a shell test (`[ -f x ]`) stays prose.
_BBCODE = (
    "b|i|u|s|bold|italic|underline|strike|dim|reverse|blink|url|link|img|code|quote|color|size|font|"
    "center|left|right|spoiler|list|table|tr|td|th"
)

#: (pattern, group whose span is markup) over the normalized query.
_MARKUP: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"<(script|style)\b[^<>]*>.*?</\1\s*>", re.DOTALL), 0),
    (re.compile(r"</?[a-z][a-z0-9:-]*(?:\s[^<>]*)?/?>"), 0),
    (re.compile(rf"\[/?(?:{_BBCODE})(?:[= ][^\[\]]*)?\](?!\()"), 0),
    (re.compile(r"&(?:[a-z][a-z0-9]{1,7}|#x?[0-9a-f]+);|&(?:nbsp|lt|gt|amp|quot|apos)(?![a-z0-9])"), 0),
    (re.compile(r"(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*)://"), 1),
    (re.compile(r"(?<=\w)\.([a-z][a-z0-9]{0,4})(?![a-z0-9_-]|\.[a-z0-9])"), 1),
    (re.compile(r"```([a-z0-9_+#.-]+)"), 1),
)


def markup_words(query: str) -> set[str]:
    """The analyzer's Latin-letter words of `query` that occur only as markup (module docstring)."""
    text = normalize_text(query)
    spans = sorted(m.span(group) for pattern, group in _MARKUP for m in pattern.finditer(text))
    if not spans:
        return set()
    markup = " ".join(text[start:end] for start, end in spans)
    prose = list(text)
    for start, end in spans:
        prose[start:end] = " " * (end - start)
    words = {w for w in tokenize(markup) if _LATIN_LETTER.search(w) and not _CJK.search(w)}
    return words - set(tokenize("".join(prose)))
