"""jieba on the SQLite prefix dictionary cuts exactly as jieba on its in-memory dictionary (cold start)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtriage.index import jieba_dictionary

TEXTS = [
    "如何查出一个特定的文件属于哪个软件包？",
    "Debian 声称可以更新正在运行的程序，这是怎么做到的？",
    "中华人民共和国的研究生命起源",
    "发票过期了还能报销吗，审批超时会自动通过吗",
    "升级到 v2.3.1 后出现 E1001 错误，重启 qdrant 服务也不行",
    "我应该如何保存关于安装了哪些软件包的日志？我想知道什么时候进行了安装和卸载！",
    "上海自来水来自海上，长春市长春节讲话",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder in which the first tokenizer wrote the prefix dictionary (built once: ~seconds)."""
    folder = tmp_path_factory.mktemp("jieba-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGTRIAGE_JIEBA_CACHE_DIR", str(folder))
        first = jieba_dictionary.new_tokenizer()
    assert isinstance(first.FREQ, dict), "the first tokenizer loads jieba's dictionary and writes the file"
    assert list(folder.glob("prefix-*.sqlite"))
    return folder


def _cuts(tokenizer: object, texts: list[str]) -> list[list[tuple[str, int, int]]]:
    return [list(tokenizer.tokenize(text, mode="search")) for text in texts]  # type: ignore[attr-defined]


def test_lazy_dictionary_cuts_like_the_full_one(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTRIAGE_JIEBA_CACHE_DIR", str(cache_dir))
    lazy = jieba_dictionary.new_tokenizer()
    assert isinstance(lazy.FREQ, jieba_dictionary.PrefixDictionary)
    full = jieba_dictionary.new_tokenizer()
    full.FREQ._load_everything()
    assert isinstance(full.FREQ, dict)
    assert _cuts(lazy, TEXTS) == _cuts(full, TEXTS)
    assert lazy.total == full.total
    assert isinstance(lazy.FREQ, jieba_dictionary.PrefixDictionary), (
        "a few queries stay on the lazy dictionary"
    )


def test_many_lookups_switch_to_the_full_dictionary(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTRIAGE_JIEBA_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(jieba_dictionary, "FULL_LOAD_AFTER", 40)
    tokenizer = jieba_dictionary.new_tokenizer()
    expected = _cuts(tokenizer, TEXTS[:1])
    cuts = _cuts(tokenizer, TEXTS)
    assert isinstance(tokenizer.FREQ, dict), "indexing-sized work loads the whole dictionary"
    assert cuts[0] == expected[0]
    reference = jieba_dictionary.new_tokenizer()
    reference.FREQ._load_everything()
    assert cuts == _cuts(reference, TEXTS)


def test_an_unwritable_cache_folder_falls_back_to_jieba(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("RAGTRIAGE_JIEBA_CACHE_DIR", str(blocker / "jieba"))
    tokenizer = jieba_dictionary.new_tokenizer()
    assert isinstance(tokenizer.FREQ, dict)
    assert [w for w, _, _ in tokenizer.tokenize("软件包", mode="search")] == ["软件", "软件包"]
