"""jieba-rs (`rjieba`) segments exactly as Python jieba: every token, offset and position.

The index built with one and queried with the other must see the same terms, so the check is
equality of `analyzer.segments` under `RAGTRIAGE_SEGMENTER=rust` and `=python` on real Chinese text
(the fixture KB, and the Debian Reference when `../shared/data` is present) and on generated
strings full of the ASCII joiners where jieba-rs differs before `segment_rs` corrects it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtriage.index import analyzer
from ragtriage.index.segment_rs import (
    SENTINEL,
    search_segments,
    search_words,
    search_words_around,
    search_words_bulk,
)
from tests.conftest import FIXTURES_DIR, SHARED_DIR

Segments = list[tuple[str, int, int]]


def _segments(text: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> Segments:
    monkeypatch.setenv("RAGTRIAGE_SEGMENTER", mode)
    return list(analyzer.segments(text))


def _words(words: Iterable[str]) -> list[str]:
    """Words with a letter or digit (punctuation-only tokens are dropped by the analyzer)."""
    return [word for word in words if any(ch.isalnum() for ch in word)]


def _chunks(texts: Iterator[str], size: int = 400) -> list[str]:
    chunks: list[str] = []
    for text in texts:
        flat = " ".join(re.sub(r"<[^>]+>", " ", text).split())
        chunks.extend(flat[start : start + size] for start in range(0, len(flat), size))
    return chunks


@pytest.mark.parametrize(
    "text",
    [
        "设置background-repeat为no-repeat",
        "访问www.debian.org下载，或ftp.us.debian.org镜像",
        "posix 1003.1-1990标准与lsb_release命令",
        "foo.tar.gz文件和a-b-c以及c++、c#、3.5%的用户",
        "升级到v2.3.1后报错E1001，sources.list里写了non-free",
        "扩展字㐀㐁和兼容字﨎与新字鿖鿗混在中文里",
        "中华人民共和国的研究生命起源，上海自来水来自海上",
        "江南style-x和4s店.com",
    ],
)
def test_rust_segments_equal_python_segments(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _segments(text, "python", monkeypatch)
    assert _segments(text, "rust", monkeypatch) == expected
    assert _words(search_words(text, analyzer._python_search)) == _words(
        word for word, _, _ in analyzer._python_search(text)
    )


def test_jieba_rs_alone_differs_where_corrected() -> None:
    """The correction is needed: raw jieba-rs keeps a dotted host name whole, Python jieba splits it."""
    import rjieba

    raw = [word for word, _, _ in rjieba.tokenize("访问www.debian.org下载", mode="search", hmm=True)]
    assert "www.debian.org" in raw
    fixed = [word for word, _, _ in search_segments("访问www.debian.org下载", analyzer._python_search)]
    assert "www.debian.org" not in fixed and {"www", "debian", "org"} <= set(fixed)


def test_fixture_kb_tokens_are_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    files = sorted(path for path in (FIXTURES_DIR / "kb").rglob("*") if path.suffix in (".md", ".html"))
    chunks = _chunks(path.read_text(encoding="utf-8") for path in files)
    assert len(chunks) > 50
    python = [_segments(chunk, "python", monkeypatch) for chunk in chunks]
    rust = [_segments(chunk, "rust", monkeypatch) for chunk in chunks]
    assert rust == python


@pytest.mark.realdata
def test_debian_reference_tokens_are_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    debs = SHARED_DIR / "data" / "debian-docs-zh"
    if not debs.is_dir():
        pytest.skip(f"{debs} is absent (the Debian documentation packages)")
    from ragtriage_demo.debian_docs import extract

    extract(debs, tmp_path)
    pages = sorted((tmp_path / "reference").glob("*.zh-cn.html"))[:6]
    chunks = _chunks(page.read_text(encoding="utf-8") for page in pages)
    assert len(chunks) > 100
    python = [_segments(chunk, "python", monkeypatch) for chunk in chunks]
    rust = [_segments(chunk, "rust", monkeypatch) for chunk in chunks]
    mismatched = [n for n, (a, b) in enumerate(zip(python, rust, strict=True)) if a != b]
    assert mismatched == []
    assert sum(map(len, python)) > 10_000


@settings(max_examples=600, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("软件包安装中华人民共和国江南店 abcdeorgwxsty.-_+#&%0123459的㐀﨎")),
        max_size=60,
    )
)
def test_generated_text_segments_identically(text: str) -> None:
    def kept(segments: Iterable[tuple[str, int, int]]) -> Segments:
        return [segment for segment in segments if any(ch.isalnum() for ch in segment[0])]

    assert kept(search_segments(text, analyzer._python_search)) == kept(analyzer._python_search(text))


def test_auto_mode_starts_on_python_jieba(monkeypatch: pytest.MonkeyPatch) -> None:
    """A single query does not import rjieba (its dictionary load is cold-start time)."""
    monkeypatch.setenv("RAGTRIAGE_SEGMENTER", "auto")
    monkeypatch.setattr(analyzer, "_segmented", 0)
    assert analyzer._use_rust() is False
    monkeypatch.setattr(analyzer, "_segmented", analyzer.RUST_AFTER)
    assert analyzer._use_rust() is True


# --- The bulk path (`analyzer.terms`: one jieba-rs call per text) equals the piece-by-piece one ---


def _piece_by_piece_words(normalized: str) -> list[str]:
    """`search_words` of each piece between codes, each code in its place: what the bulk path replaces."""
    cuts = [m.span() for m in analyzer._ASCII_RUN.finditer(normalized) if analyzer._is_code(m.group())]
    words: list[str] = []
    done = 0
    for start, end in cuts:
        words += search_words(normalized[done:start], analyzer._python_search)
        words.append(normalized[start:end])
        done = end
    return words + search_words(normalized[done:], analyzer._python_search)


def _bulk_words(normalized: str) -> list[str] | None:
    return search_words_bulk(normalized, analyzer._cut_codes, analyzer._python_search)


def _assert_bulk_equal(texts: Iterable[str]) -> tuple[int, int]:
    """Every text's terms (and words, punctuation included) equal the piece-by-piece path's.

    Returns (texts, terms) compared. Failures name the first differing text and position.
    """
    count = total = 0
    for text in texts:
        normalized = analyzer.normalize_text(text)
        assert normalized == unicodedata.normalize("NFKC", text).lower(), text
        expected = analyzer._terms_by_piece(normalized)
        found = analyzer.terms(text)
        if found != expected:
            at = next(
                (n for n, pair in enumerate(zip(found, expected, strict=False)) if pair[0] != pair[1]), None
            )
            raise AssertionError(f"text {text!r}: terms differ at {at}: {found[:50]} != {expected[:50]}")
        words = _bulk_words(normalized)
        if words is not None:
            expected_words = _piece_by_piece_words(normalized)
            assert words == expected_words, text
            # The route for texts with a joined run next to Han, tried on every text.
            cut = analyzer._cut_codes(normalized, SENTINEL)
            assert search_words_around(*cut, analyzer._python_search) == expected_words, text
        count += 1
        total += len(expected)
    return count, total


@pytest.mark.parametrize(
    ("text", "bulk"),
    [
        ("设置background-repeat为no-repeat，见 www.debian.org/doc/ 或 apt-get(8)", True),
        ("升级到v2.3.1后报错E1001%-x，sources.list里写了non-free；2.3.1-1版本", True),
        ("用apt-get和dpkg-deb命令，c++、c#与3.5%的用户", True),
        ("江南style-x和4s店.com", False),  # a dictionary word across a run's edge: piece by piece
        ("买-1号店的", False),  # `1号店` across the end of the run `-1`
        ("江南style%e1001", False),  # a run (`style%`) at the start of its stretch only
        ("升级v2.3.1%-1号店", False),  # a run (`%-1`) at the end of its stretch only
        ("扩展字㐀和兼容字﨎混在apt-get里", False),  # characters only Python jieba segments right
        ("文本里本来就有\x00这个字符和a-b", False),
        ("\r\nwww.a.b\r\n安装\r\n", True),
        ("", True),
    ],
)
def test_bulk_terms_equal_piece_by_piece(text: str, bulk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    normalized = analyzer.normalize_text(text)
    assert (_bulk_words(normalized) is not None) == bulk
    _assert_bulk_equal([text])
    # and both equal Python jieba's (the oracle) through the analyzer
    monkeypatch.setenv("RAGTRIAGE_SEGMENTER", "python")
    assert analyzer._terms_by_piece(normalized) == analyzer.tokenize(text) == analyzer.terms(text)


def test_bulk_terms_equal_on_fixture_kb() -> None:
    files = sorted(path for path in (FIXTURES_DIR / "kb").rglob("*") if path.suffix in (".md", ".html"))
    texts = [path.read_text(encoding="utf-8") for path in files]
    # Every chunk at two offsets: run and block edges fall in different places.
    count, total = _assert_bulk_equal([*_chunks(iter(texts)), *_chunks(iter(texts), size=290)])
    assert count > 100 and total > 5_000


@pytest.mark.realdata
def test_bulk_terms_equal_on_all_debian_chunks(tmp_path: Path) -> None:
    """Every 400- and 290-character chunk of both Debian packages (about 2,300 chunks, 1 s)."""
    debs = SHARED_DIR / "data" / "debian-docs-zh"
    if not debs.is_dir():
        pytest.skip(f"{debs} is absent (the Debian documentation packages)")
    from ragtriage_demo.debian_docs import extract

    extract(debs, tmp_path)
    pages = sorted([*(tmp_path / "faq").glob("*.html"), *(tmp_path / "reference").glob("*.html")])
    texts = [page.read_text(encoding="utf-8") for page in pages]
    count, total = _assert_bulk_equal([*_chunks(iter(texts)), *_chunks(iter(texts), size=290)])
    assert count > 2_000 and total > 200_000


_FRAGMENTS = [
    *"软件包安装中华人民共和国江南店的 ，。()/:\r\n\t㐀﨎鿖\x00",
    *"abcdeorgwxsty.-_+#&%0123459",
    "apt-get",
    "www.debian.org",
    "v2.3.1",
    "e1001",
    "ERR_42",
    "1003.1-1990",
    "c++",
    "4s",
    "style",
    "sources.list",
    "non-free",
    "x86_64",
    "lsb_release",
    "3.5%",
    "...",
    "--",
    "—",
    "…",
    # The dictionary's only words mixing ASCII and Han in lower case (with 4s店).
    "1号店",
    "号店",
    "江南style",
]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map("".join))
def test_generated_text_bulk_terms_equal(text: str) -> None:
    _assert_bulk_equal([text])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=30).map("".join))
def test_generated_text_bulk_terms_equal_python_jieba(text: str) -> None:
    """The oracle: the bulk path's terms are Python jieba's, through the same analyzer."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGTRIAGE_SEGMENTER", "python")
        python_terms = [token.text for token in analyzer._ANALYZER(text)]
    assert analyzer.terms(text) == python_terms


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("，（）？：；！…\u3000ＡａＺ１ｶﾞﾟ\u0301\u0308\u3099\uff9e가ᄀ中e .,"))
    )
    | st.text()
)
def test_normalize_text_is_nfkc_then_lower_case(text: str) -> None:
    """Full-width punctuation replaced before NFKC (the quick check then passes) changes nothing."""
    assert analyzer.normalize_text(text) == unicodedata.normalize("NFKC", text).lower()


def test_joined_run_next_to_han_takes_the_offsets_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """`用apt-get和` is one jieba block: the run's words come from jieba-rs's offsets on that block."""
    from ragtriage.index import segment_rs

    calls: list[str] = []
    real = segment_rs.search_words_around

    def counted(text: str, cuts: list[str], python: segment_rs.PythonTokenize) -> list[str] | None:
        calls.append(text)
        return real(text, cuts, python)

    monkeypatch.setattr(segment_rs, "search_words_around", counted)
    for text, routed in [
        ("用apt-get和dpkg-deb命令，v2.3.1", True),
        ("用 apt-get 和 dpkg-deb 命令，v2.3.1", False),
    ]:
        calls.clear()
        assert analyzer.terms(text) == analyzer._terms_by_piece(analyzer.normalize_text(text))
        assert bool(calls) == routed
