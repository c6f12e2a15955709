"""Extract the Simplified Chinese Debian FAQ and Debian Reference from their `.deb` files.

A `.deb` is an `ar` archive whose `data.tar.*` member holds the installed files. The FAQ pages live
under `usr/share/doc/debian/FAQ/zh-cn/`, the Reference pages under `usr/share/debian-reference/`
(one `*.zh-cn.html` file per chapter plus `index.zh-cn.html`, and the whole manual as
`debian-reference.zh-cn.pdf`). The HTML pages are written, flat, into `<out>/faq/` and
`<out>/reference/`; the PDF goes into `<out>/reference-pdf/`, so that adding `reference/` does not
add the same manual twice.

`scripts/extract_debian_docs.py` is the command-line face; `ragtriage demo --real` and the tests
call `extract()` directly.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypedDict

#: The repository checkout (the package is installed editable from it).
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DEBS_DIR = REPO_ROOT.parent / "shared" / "data" / "debian-docs-zh"
DEFAULT_OUT_DIR = REPO_ROOT / "data-extracted"

AR_MAGIC = b"!<arch>\n"
AR_HEADER_SIZE = 60


@dataclass(frozen=True)
class DocSource:
    """Where one document set lives: its package, its folder inside the package, its output folder."""

    package: str
    member_dir: str
    out_subdir: str
    suffix: str = ".zh-cn.html"


SOURCES = (
    DocSource("debian-faq-zh-cn", "usr/share/doc/debian/FAQ/zh-cn", "faq"),
    DocSource("debian-reference-zh-cn", "usr/share/debian-reference", "reference"),
    DocSource("debian-reference-zh-cn", "usr/share/debian-reference", "reference-pdf", ".zh-cn.pdf"),
)


class SourceReport(TypedDict):
    """What was extracted for one document set."""

    deb: str
    dir: str
    files: list[str]
    bytes: int


class ExtractError(Exception):
    """A package is missing or is not the archive it should be; the message says which and how to fix it."""


def iter_ar_members(blob: bytes, origin: str) -> Iterator[tuple[str, bytes]]:
    """Yield (name, data) for each member of a Unix `ar` archive (the common and GNU formats)."""
    if not blob.startswith(AR_MAGIC):
        raise ExtractError(f"{origin}: not an ar archive (no '!<arch>' header); is it a .deb file?")
    offset = len(AR_MAGIC)
    while offset + AR_HEADER_SIZE <= len(blob):
        header = blob[offset : offset + AR_HEADER_SIZE]
        if header[58:60] != b"`\n":
            raise ExtractError(f"{origin}: corrupt ar member header at byte {offset}")
        name = header[0:16].decode("ascii", errors="replace").strip()
        # GNU ar terminates names with '/', BSD and dpkg-deb do not.
        name = name.rstrip("/")
        size = int(header[48:58].decode("ascii").strip() or 0)
        start = offset + AR_HEADER_SIZE
        yield name, blob[start : start + size]
        # Members are aligned on even offsets.
        offset = start + size + (size % 2)


def data_tar(deb_path: Path) -> tarfile.TarFile:
    """Open the `data.tar.*` member of a `.deb` as a tarfile (xz, gz, bz2 or plain)."""
    for name, data in iter_ar_members(deb_path.read_bytes(), str(deb_path)):
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                raise ExtractError(
                    f"{deb_path}: {name} is zstd-compressed, which tarfile cannot read; "
                    "repack it with `dpkg-deb -R` or use an xz-compressed package"
                )
            return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    raise ExtractError(f"{deb_path}: no data.tar member; is it a .deb file?")


def find_deb(debs_dir: Path, package: str) -> Path:
    """The newest `<package>_*.deb` in debs_dir (by file name), or ExtractError naming the fix."""
    candidates = sorted(debs_dir.glob(f"{package}_*.deb"))
    if not candidates:
        raise ExtractError(
            f"{debs_dir}: no {package}_*.deb found; put the package there, pass --debs DIR, "
            f"or use --apt-download (runs `apt-get download {package}`)"
        )
    return candidates[-1]


def extract_source(deb_path: Path, source: DocSource, out_dir: Path) -> SourceReport:
    """Write the source's files from one .deb into out_dir/<out_subdir>; return counts and sizes."""
    target = out_dir / source.out_subdir
    target.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    total_bytes = 0
    with data_tar(deb_path) as archive:
        for member in archive.getmembers():
            # Regular files only: the packages also ship symlinks into other packages.
            if not member.isfile():
                continue
            path = PurePosixPath(member.name.removeprefix("./"))
            if str(path.parent) != source.member_dir or not path.name.endswith(source.suffix):
                continue
            handle = archive.extractfile(member)
            if handle is None:
                continue
            content = handle.read()
            (target / path.name).write_bytes(content)
            written.append(path.name)
            total_bytes += len(content)
    if not written:
        raise ExtractError(f"{deb_path}: no {source.member_dir}/*{source.suffix} files inside")
    return {"deb": str(deb_path), "dir": str(target), "files": sorted(written), "bytes": total_bytes}


def extract(debs_dir: Path | str, out_dir: Path | str) -> dict[str, SourceReport]:
    """Extract the FAQ and the Reference into out_dir/faq, out_dir/reference and out_dir/reference-pdf.

    Returns {"faq": {...}, "reference": {...}, "reference-pdf": {...}}, each with the .deb used, the
    output folder, the file names and the total bytes. Raises ExtractError when a package is missing
    or unreadable.
    """
    debs_path = Path(debs_dir)
    if not debs_path.is_dir():
        raise ExtractError(f"{debs_path}: folder not found; pass --debs DIR or use --apt-download")
    # Locate every package before writing anything, so a missing one leaves no half output.
    debs = {source.out_subdir: find_deb(debs_path, source.package) for source in SOURCES}
    out_path = Path(out_dir)
    return {
        source.out_subdir: extract_source(debs[source.out_subdir], source, out_path) for source in SOURCES
    }
