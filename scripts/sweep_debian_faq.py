"""Chunk-size sweep on the Debian FAQ (zh-cn): `ragtriage eval sweep` over its question headings.

Each FAQ question heading (without its number) is a query whose gold is `(page doc id, heading
anchor)`, so the gold maps onto every chunking. The FAQ is added with `kb add --no-index` to a
fresh home (the sweep indexes its own throwaway KBs), the cases imported as `cases-jsonl` with
`gold_refs`, then the sweep runs and prints its table (the command is printed too).

    python scripts/sweep_debian_faq.py [--sizes 400,800,1200,2000] [--pages kernel,faqinfo] [--work DIR] [--json]

`--pages` keeps only those FAQ pages (file names without `.zh-cn.html`): the bundled embedder is
slow on a busy machine, and a sweep embeds every chunk text that differs between sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import debian_faq  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="400,800,1200,2000", help="chunk target sizes [%(default)s]")
    parser.add_argument("--work", type=Path, default=None, help="folder kept for the home [a temporary one]")
    parser.add_argument("--pages", default=None, help="comma-separated FAQ page names [all]")
    parser.add_argument("--json", action="store_true", help="print the sweep as JSON")
    args = parser.parse_args(argv)
    if not debian_faq.debs_available():
        print(f"no Debian FAQ package in {debian_faq.DEFAULT_DEBS_DIR}; see scripts/extract_debian_docs.py")
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="ragtriage-faq-sweep-"))
    extracted = debian_faq.ensure_extracted(work / "extracted")
    faq_dir = extracted / "faq"
    if args.pages:
        subset = work / "subset" / "faq"  # the folder name is the doc id prefix
        subset.mkdir(parents=True, exist_ok=True)
        for name in args.pages.split(","):
            shutil.copy(faq_dir / f"{name.strip()}.zh-cn.html", subset)
        faq_dir = subset
    cases = work / "faq_headings.jsonl"
    questions = debian_faq.faq_questions(faq_dir)
    with cases.open("w", encoding="utf-8") as out:
        for index, q in enumerate(questions, start=1):
            case = {
                "case_id": f"faq{index:03d}",
                "query": q.query,
                "gold_refs": [{"doc_id": q.doc_id, "anchor": q.anchor}],
            }
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    home = work / "home"
    env = {**os.environ, "RAGTRIAGE_HOME": str(home)}
    ragtriage = [sys.executable, "-m", "ragtriage"]
    for step in (
        ["kb", "add", str(faq_dir), "--no-index"],
        ["eval", "import", str(cases), "--format", "cases-jsonl"],
    ):
        subprocess.run([*ragtriage, *step], env=env, check=True, stdout=subprocess.DEVNULL)
    sweep = ["eval", "sweep", "--chunk-chars", args.sizes, *(["--json"] if args.json else [])]
    pages = len(list(faq_dir.glob("*.html")))
    print(
        f"$ ragtriage {' '.join(sweep)}   ({pages} FAQ pages, {len(questions)} question headings, gold = doc#anchor)"
    )
    return subprocess.run([*ragtriage, *sweep], env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main())
