"""Eval store on a real SQLite file: dataset versions, case versions, runs, and format round trips."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.errors import InputError, NotFoundError
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.formats import CASE_FORMATS, read_cases, write_cases
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import make_engine, sqlite_url


@pytest.fixture
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    return make_engine(sqlite_url(tmp_path / "store.db"))


def _case(case_id: str, query: str, gold: dict[str, int], **extra: object) -> EvalCase:
    return EvalCase(case_id=case_id, query=query, gold=gold, **extra)  # type: ignore[arg-type]


def test_each_change_makes_a_dataset_version_and_old_versions_stay_readable(engine) -> None:  # type: ignore[no-untyped-def]
    first = eval_store.add_cases(
        engine, "ds", [_case("a", "请假流程", {"c1": 1}), _case("b", "报销", {"c2": 1})]
    )
    assert (first.dataset_version, first.added) == (1, ["a", "b"])
    same = eval_store.add_cases(engine, "ds", [_case("a", "请假流程", {"c1": 1})])
    assert same.dataset_version == 1 and same.unchanged == ["a"]
    edited = eval_store.add_cases(engine, "ds", [_case("a", "请假流程", {"c1": 1, "c9": 2})])
    assert edited.dataset_version == 2 and edited.updated == ["a"]
    assert eval_store.delete_cases(engine, "ds", ["b"]) == 3

    v1 = {c.case.case_id: c for c in eval_store.dataset_cases(engine, "ds", 1)}
    v2 = {c.case.case_id: c for c in eval_store.dataset_cases(engine, "ds", 2)}
    v3 = {c.case.case_id: c for c in eval_store.dataset_cases(engine, "ds")}
    assert v1["a"].case.gold == {"c1": 1} and v1["a"].version == 1 and set(v1) == {"a", "b"}
    assert v2["a"].case.gold == {"c1": 1, "c9": 2} and v2["a"].version == 2 and set(v2) == {"a", "b"}
    assert set(v3) == {"a"}
    assert [h.version for h in eval_store.case_history(engine, "ds", "a")] == [1, 2]


def test_unknown_dataset_and_version_are_explained(engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotFoundError, match="eval import"):
        eval_store.dataset_cases(engine, "nope")
    eval_store.add_cases(engine, "ds", [_case("a", "q", {"c": 1})])
    with pytest.raises(NotFoundError, match="versions 1..1"):
        eval_store.dataset_cases(engine, "ds", 5)
    with pytest.raises(InputError, match="twice"):
        eval_store.add_cases(engine, "ds", [_case("x", "q", {}), _case("x", "q2", {})])


def test_duplicate_lookup_uses_normalized_query_and_relevant_gold(engine) -> None:  # type: ignore[no-untyped-def]
    eval_store.add_cases(engine, "ds", [_case("a", "Ｅ１００１ 报错", {"c1": 2, "c0": 0})])
    assert eval_store.find_duplicate(engine, "ds", "e1001  报错", {"c1": 1}) == "a"
    assert eval_store.find_duplicate(engine, "ds", "e1001 报错", {"c2": 1}) is None


CASES = [
    _case(
        "q1",
        "出差报销多久内提交",
        {"travel#c0": 1},
        intent_type="policy",
        difficulty="easy",
        tags=["finance"],
        must_have=["十五天"],
    ),
    _case("q2", "请假\t审批", {"leave#c0": 1, "leave#c1": 1}),
    _case("q3", "年终奖什么时候发", {}),
]


@pytest.mark.parametrize("fmt", CASE_FORMATS)
def test_every_import_format_round_trips_through_export(fmt: str, tmp_path: Path, home: Path) -> None:
    source = tmp_path / f"source.{fmt}"
    granularity = "doc" if fmt == "beir" else "chunk"
    cases = [c.model_copy(update={"gold_granularity": granularity}) for c in CASES]
    if fmt in ("beir", "trec"):  # these formats carry neither metadata nor tabs in query text
        cases = [
            EvalCase(
                case_id=c.case_id, query=c.query.replace("\t", " "), gold=c.gold, gold_granularity=granularity
            )
            for c in cases
        ]
    write_cases(cases, source, fmt)  # type: ignore[arg-type]
    runner = CliRunner()
    imported = runner.invoke(cli, ["eval", "import", str(source), "--format", fmt, "--dataset", "rt"])
    assert imported.exit_code == 0, imported.output
    out = tmp_path / f"out.{fmt}"
    exported = runner.invoke(cli, ["eval", "export", "--dataset", "rt", "--format", fmt, str(out)])
    assert exported.exit_code == 0, exported.output
    again = read_cases(out, fmt)  # type: ignore[arg-type]
    original = read_cases(source, fmt)  # type: ignore[arg-type]
    key = lambda c: c.case_id  # noqa: E731
    assert sorted(again, key=key) == sorted(original, key=key)
    reimported = runner.invoke(cli, ["eval", "import", str(out), "--format", fmt, "--dataset", "rt"])
    assert "0 added, 0 updated, 3 unchanged" in reimported.output
