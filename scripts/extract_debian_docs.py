"""Extract the Simplified Chinese Debian FAQ and Debian Reference (HTML, and the Reference PDF) from their `.deb` files.

Usage:
    python scripts/extract_debian_docs.py [--debs DIR] [--out DIR] [--apt-download]

The work is done by `ragtriage_demo.debian_docs.extract`. Exit code 2 when the packages are missing
or unreadable.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from ragtriage_demo.debian_docs import (  # noqa: F401  (re-exported for callers that load this script)
    DEFAULT_DEBS_DIR,
    DEFAULT_OUT_DIR,
    SOURCES,
    DocSource,
    ExtractError,
    SourceReport,
    data_tar,
    extract,
    extract_source,
    find_deb,
    iter_ar_members,
)


def apt_download(target_dir: Path) -> None:
    """Fetch the two packages with `apt-get download` into target_dir."""
    packages = [source.package for source in SOURCES]
    try:
        subprocess.run(["apt-get", "download", *packages], cwd=target_dir, check=True)
    except FileNotFoundError as error:
        message = "apt-get not found; download the .deb files by hand and pass --debs DIR"
        raise ExtractError(message) from error
    except subprocess.CalledProcessError as error:
        message = (
            f"`apt-get download {' '.join(packages)}` failed with exit code {error.returncode}; "
            "run `apt-get update` first or pass --debs DIR"
        )
        raise ExtractError(message) from error


def _human_size(size: int) -> str:
    """1234567 → '1.2 MB'."""
    value = float(size)
    for unit in ("B", "kB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--debs",
        type=Path,
        default=DEFAULT_DEBS_DIR,
        help=f"folder with the .deb files (default: {DEFAULT_DEBS_DIR})",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT_DIR, help=f"output folder (default: {DEFAULT_OUT_DIR})"
    )
    parser.add_argument(
        "--apt-download",
        action="store_true",
        help="fetch the packages with `apt-get download` into a temporary folder first",
    )
    args = parser.parse_args(argv)
    try:
        if args.apt_download:
            with tempfile.TemporaryDirectory(prefix="ragtriage-debs-") as temp:
                apt_download(Path(temp))
                report = extract(temp, args.out)
        else:
            report = extract(args.debs, args.out)
    except ExtractError as error:
        print(f"extract_debian_docs: {error}", file=sys.stderr)
        return 2
    for name, part in report.items():
        print(
            f"{name}: {len(part['files'])} files, {_human_size(part['bytes'])} → {part['dir']} "
            f"(from {Path(part['deb']).name})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
