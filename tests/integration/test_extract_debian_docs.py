"""scripts/extract_debian_docs.py: real packages when present, hand-built packages always."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, load_script

REAL_DEBS_DIR = REPO_ROOT.parent / "shared" / "data" / "debian-docs-zh"
HEADING_WITH_ANCHOR = re.compile(r"<h[1-6][^>]*\bid=\"[^\"]+\"|<h[1-6][^>]*>\s*<a\s+id=\"[^\"]+\"")


extractor = load_script("extract_debian_docs")


def _ar_archive(members: list[tuple[str, bytes]]) -> bytes:
    """A Unix ar archive as dpkg-deb writes it (odd-sized members padded with a newline)."""
    out = bytearray(b"!<arch>\n")
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode("ascii")
        assert len(header) == 60
        out += header + data
        if len(data) % 2:
            out += b"\n"
    return bytes(out)


def _data_tar_xz(files: dict[str, bytes], symlinks: dict[str, str]) -> bytes:
    """An xz tarball with ./-prefixed member names, like a .deb's data.tar.xz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        for name, link_target in symlinks.items():
            info = tarfile.TarInfo(f"./{name}")
            info.type = tarfile.SYMTYPE
            info.linkname = link_target
            archive.addfile(info)
    return buffer.getvalue()


def _write_deb(path: Path, files: dict[str, bytes], symlinks: dict[str, str] | None = None) -> None:
    """Write a minimal .deb (debian-binary, control.tar.xz, data.tar.xz)."""
    control = _data_tar_xz({"control": b"Package: x\n"}, {})
    data = _data_tar_xz(files, symlinks or {})
    path.write_bytes(
        _ar_archive([("debian-binary", b"2.0\n"), ("control.tar.xz", control), ("data.tar.xz", data)])
    )


@pytest.fixture
def tiny_debs(tmp_path: Path) -> Path:
    """Hand-built FAQ and Reference packages with distractors (other languages, images, symlinks)."""
    debs = tmp_path / "debs"
    debs.mkdir()
    faq_dir = "usr/share/doc/debian/FAQ/zh-cn"
    _write_deb(
        debs / "debian-faq-zh-cn_11.1_all.deb",
        {
            f"{faq_dir}/basic-defs.zh-cn.html": '<h2><a id="whatisfaq"></a>1.1 问</h2>'.encode(),
            f"{faq_dir}/index.zh-cn.html": b"<h1>FAQ</h1>",
            f"{faq_dir}/debian.css": b"body {}",
            f"{faq_dir}/images/note.png": b"\x89PNG",
            "usr/share/doc/debian/FAQ/debian-faq.zh-cn.txt.gz": b"gz",
        },
    )
    _write_deb(
        debs / "debian-reference-zh-cn_2.100_all.deb",
        {
            "usr/share/debian-reference/ch01.zh-cn.html": "<h1>第 1 章</h1>".encode(),
            "usr/share/debian-reference/index.zh-cn.html": b"<h1>index</h1>",
            "usr/share/debian-reference/debian-reference.zh-cn.pdf": b"%PDF",
        },
        symlinks={"usr/share/doc/debian-reference-zh-cn/docs": "../../debian-reference"},
    )
    return debs


def test_extracts_only_zh_cn_html_and_the_reference_pdf_from_hand_built_debs(
    tiny_debs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    report = extractor.extract(tiny_debs, out)
    assert report["faq"]["files"] == ["basic-defs.zh-cn.html", "index.zh-cn.html"]
    assert report["reference"]["files"] == ["ch01.zh-cn.html", "index.zh-cn.html"]
    assert report["reference-pdf"]["files"] == ["debian-reference.zh-cn.pdf"]
    assert (out / "reference-pdf" / "debian-reference.zh-cn.pdf").read_bytes() == b"%PDF"
    assert sorted(p.name for p in (out / "faq").iterdir()) == report["faq"]["files"]
    assert sorted(p.name for p in (out / "reference").iterdir()) == report["reference"]["files"]
    assert (out / "reference" / "ch01.zh-cn.html").read_text(encoding="utf-8") == "<h1>第 1 章</h1>"
    assert report["faq"]["bytes"] == sum(p.stat().st_size for p in (out / "faq").iterdir())


def test_missing_package_exits_2_and_names_the_fix(
    tiny_debs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tiny_debs / "debian-reference-zh-cn_2.100_all.deb").unlink()
    out = tmp_path / "out"
    assert extractor.main(["--debs", str(tiny_debs), "--out", str(out)]) == 2
    message = capsys.readouterr().err
    assert "debian-reference-zh-cn_*.deb" in message and "--debs" in message
    assert not out.exists(), "nothing is written when a package is missing"


def test_missing_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert extractor.main(["--debs", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    assert "folder not found" in capsys.readouterr().err


def test_file_that_is_not_a_deb_exits_2(
    tiny_debs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tiny_debs / "debian-faq-zh-cn_11.1_all.deb").write_bytes(b"<html>a download error page</html>")
    assert extractor.main(["--debs", str(tiny_debs), "--out", str(tmp_path / "out")]) == 2
    assert "not an ar archive" in capsys.readouterr().err


@pytest.mark.realdata
@pytest.mark.skipif(not REAL_DEBS_DIR.is_dir(), reason=f"Debian doc packages not found at {REAL_DEBS_DIR}")
def test_extracts_real_faq_and_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "extracted"
    assert extractor.main(["--debs", str(REAL_DEBS_DIR), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "faq:" in printed and "reference:" in printed

    faq_pages = sorted((out / "faq").glob("*.html"))
    assert all(page.name.endswith(".zh-cn.html") for page in faq_pages)
    anchored_headings = sum(
        len(HEADING_WITH_ANCHOR.findall(page.read_text(encoding="utf-8"))) for page in faq_pages
    )
    assert anchored_headings >= 100, f"only {anchored_headings} FAQ headings carry an id anchor"
    assert "什么是 Debian" in (out / "faq" / "basic-defs.zh-cn.html").read_text(encoding="utf-8")

    reference_pages = {page.name for page in (out / "reference").glob("*.html")}
    assert {"index.zh-cn.html", "ch01.zh-cn.html"} <= reference_pages
    assert len(reference_pages) >= 10
    assert sum((out / "reference" / name).stat().st_size for name in reference_pages) > 1_000_000
    assert "reference-pdf:" in printed
    assert (out / "reference-pdf" / "debian-reference.zh-cn.pdf").read_bytes().startswith(b"%PDF")
