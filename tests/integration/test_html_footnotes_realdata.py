"""Real Debian FAQ and Reference pages: each footnote is stored under the section that cites it.

The pages come from the packages in `../shared/data/debian-docs-zh` through `debian_docs.extract`;
the tests skip, saying so, when that folder is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragtriage.kb import html_loader, service
from ragtriage.kb.html_footnotes import Footnotes
from ragtriage.workspace import Workspace
from tests.conftest import SHARED_DIR

DEBS_DIR = SHARED_DIR / "data" / "debian-docs-zh"

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(
        not DEBS_DIR.is_dir(),
        reason=f"real data absent: {DEBS_DIR} not found (apt-get download debian-faq-zh-cn debian-reference-zh-cn)",
    ),
]

# (doc_id, text of the footnote, anchor of the section citing it)
FOOTNOTES = [
    ("faq/customizing.zh-cn", "Debian 将默认的 init 系统从 System V init 改为了", "booting"),
    ("faq/ftparchives.zh-cn", "在现在的 sid 还不存在的时候", "sid"),
    ("faq/ftparchives.zh-cn", "dists/stable/main、dists/stable/contrib", "archsections"),
    ("faq/ftparchives.zh-cn", "历史上，软件包曾依照所处的发布版本", "pools"),
    ("faq/support.zh-cn", "debian-列表主题-REQUEST@lists.debian.org", "mailinglistconduct"),
    ("faq/pkgtools.zh-cn", "比如红帽软件包管理器，又叫做 rpm", "apt-get"),
    ("faq/compatibility.zh-cn", "Linux Standard Base 是一个允许相同的二进制软件包", "otherdistribs"),
    ("reference/ch01.zh-cn", "即使旧的 vim 也能够启动完全的", "_using_vim"),
    ("reference/ch09.zh-cn", "更多精心制作的定制例子", "_customizing_vim_with internal_features"),
    ("reference/ch09.zh-cn", "vim-pathogen 也很流行", "_customizing_vim_with_external_packages"),
    ("reference/ch10.zh-cn", "一个只能写一次的媒介", "_backup_and_recovery_policy"),
    ("reference/ch10.zh-cn", "不能够通过在系统里面输入同样的字符串来重新生成", "_backup_and_recovery_policy"),
    ("reference/ch10.zh-cn", '如果你使用 "~/.vimrc" 代替', "_using_gnupg_with_vim"),
]
# Where the loader used to put them: each page's last section.
LAST_SECTION = {
    "faq/customizing.zh-cn": "diverse",
    "faq/ftparchives.zh-cn": "ownrepository",
    "faq/support.zh-cn": "bugreport",
    "faq/pkgtools.zh-cn": "datapackages",
    "faq/compatibility.zh-cn": "non-debian-programs",
    "reference/ch01.zh-cn": "_script_snippets_for_piping_commands",
    "reference/ch09.zh-cn": "_multiple_desktop_systems",
    "reference/ch10.zh-cn": "_other_version_control_systems",
}
PAGES_WITH_FOOTNOTES = sorted(LAST_SECTION)
PAGES_WITHOUT_FOOTNOTES = ["faq/basic-defs.zh-cn", "reference/ch03.zh-cn"]


@pytest.fixture(scope="module")
def debian_html(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from ragtriage_demo.debian_docs import extract

    extracted = tmp_path_factory.mktemp("debian")
    report = extract(DEBS_DIR, extracted / "all")
    # The pages with footnotes and one page without in each set: adding all 32 pages three times is slow.
    folders = []
    for name in ("faq", "reference"):
        folder = extracted / name
        folder.mkdir()
        for doc_id in [*LAST_SECTION, *PAGES_WITHOUT_FOOTNOTES]:
            if doc_id.startswith(f"{name}/"):
                page = doc_id.split("/")[1] + ".html"
                shutil.copy(Path(report[name]["dir"]) / page, folder / page)
        folders.append(folder)
    return folders[0], folders[1]


def _chunks_by_doc(workspace: Workspace) -> dict[str, list[tuple[str | None, str, str]]]:
    """doc_id → [(anchor, chunk_id, content)] in document order."""
    result: dict[str, list[tuple[str | None, str, str]]] = {}
    for chunk in service.list_chunks(workspace.engine, workspace.settings.kb.name, include_content=True):
        result.setdefault(chunk.doc_id, []).append((chunk.anchor, chunk.chunk_id, chunk.content))
    return result


def _ids_by_anchor(chunks: list[tuple[str | None, str, str]]) -> dict[str | None, list[str]]:
    result: dict[str | None, list[str]] = {}
    for anchor, chunk_id, _ in chunks:
        result.setdefault(anchor, []).append(chunk_id)
    return result


def test_kb_add_stores_each_footnote_under_the_section_citing_it(
    workspace: Workspace, debian_html: tuple[Path, Path]
) -> None:
    service.add_paths(workspace.engine, workspace.settings, list(debian_html))

    chunks = _chunks_by_doc(workspace)
    for doc_id, footnote, citing_anchor in FOOTNOTES:
        holders = [anchor for anchor, _, content in chunks[doc_id] if footnote in content]
        assert holders == [citing_anchor], (doc_id, footnote)
        assert chunks[doc_id][-1][0] == LAST_SECTION[doc_id]
    # DocBook's marker-only paragraph no longer leaves a lone "[2]" ahead of the footnote.
    sid = [content for anchor, _, content in chunks["faq/ftparchives.zh-cn"] if anchor == "sid"]
    assert "\n\n[2]\n\n" not in "\n\n".join(sid) + "\n\n"


def test_re_adding_pages_stored_with_footnotes_at_the_end_changes_only_those_pages_and_sections(
    workspace: Workspace, debian_html: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a home built before the fix holds: no footnote is relocated.
    with monkeypatch.context() as patched:
        patched.setattr(html_loader, "find_footnotes", lambda root, is_skipped: Footnotes())
        first = service.add_paths(workspace.engine, workspace.settings, list(debian_html))
    before = _chunks_by_doc(workspace)

    report = service.add_paths(workspace.engine, workspace.settings, list(debian_html))

    assert sorted(report.changed_doc_ids) == PAGES_WITH_FOOTNOTES
    assert (first.added, report.unchanged) == (len(PAGES_WITH_FOOTNOTES) + 2, 2) and report.adds_up
    after = _chunks_by_doc(workspace)
    moved_between = {(doc_id, citing) for doc_id, _, citing in FOOTNOTES} | set(LAST_SECTION.items())
    for doc_id in PAGES_WITH_FOOTNOTES:
        ids_before = _ids_by_anchor(before[doc_id])
        ids_after = _ids_by_anchor(after[doc_id])
        assert list(ids_before) == list(ids_after), doc_id
        for anchor in ids_after:
            # A section gets new chunk ids exactly when a footnote left it or joined it.
            changed = ids_before[anchor] != ids_after[anchor]
            assert changed == ((doc_id, anchor) in moved_between), (doc_id, anchor)
    assert {doc_id: before[doc_id] for doc_id in before if doc_id not in PAGES_WITH_FOOTNOTES} == {
        doc_id: after[doc_id] for doc_id in after if doc_id not in PAGES_WITH_FOOTNOTES
    }
