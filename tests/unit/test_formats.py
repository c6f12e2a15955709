"""Eval-set formats: every format reads → writes → reads equal; parse errors name file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.errors import InputError
from ragtriage.eval.formats import (
    EvalCase,
    read_cases,
    read_trec_qrels,
    read_trec_run,
    write_cases,
    write_trec_qrels,
    write_trec_run,
)

CASES_JSON = """[
  {"case_id": "c-1", "question": "如何重置 Ｑｄｒａｎｔ 密码?", "relevant_chunk_ids": ["faq#a", "faq#b"],
   "k": 5},
  {"case_id": "c-2", "question": "no answer here", "relevant_chunk_ids": []},
  {"case_id": "c-3", "question": "graded", "relevant_chunk_ids": ["x"], "grades": {"x": 3, "y": 0, "z": -1},
   "must_have_constraints": ["v2.3"], "intent_type": "howto", "difficulty": "hard", "tags": ["billing"]}
]
"""

CASES_JSONL = "\n".join(
    json.dumps(row, ensure_ascii=False)
    for row in [
        {
            "query": "apt 源怎么换",
            "positive_doc_ids": ["debian-ref/apt"],
            "must_have_constraints": ["bookworm"],
            "intent_type": "howto",
            "difficulty": "easy",
        },
        {"query": "没有答案", "positive_doc_ids": [], "intent_type": "chitchat", "difficulty": 3},
        {
            "case_id": "named",
            "query": "graded",
            "positive_doc_ids": {"d1": 2, "d2": 1},
            "tags": ["t"],
            "k": 10,
        },
    ]
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def round_trip(path: Path, fmt: str, tmp_path: Path, **read_options) -> list[EvalCase]:
    first = read_cases(path, fmt, **read_options)
    out = tmp_path / f"out-{fmt}"
    write_cases(first, out, fmt)
    second = read_cases(out, fmt, **read_options)
    assert second == first
    # Writing again gives the same bytes: exports are stable.
    out2 = tmp_path / f"out2-{fmt}"
    write_cases(second, out2, fmt)
    if out.is_file():
        assert out2.read_bytes() == out.read_bytes()
    return first


def test_cases_json_round_trip(tmp_path):
    cases = round_trip(write(tmp_path / "cases.json", CASES_JSON), "cases-json", tmp_path)
    assert cases[0] == EvalCase(
        case_id="c-1", query="如何重置 Ｑｄｒａｎｔ 密码?", gold={"faq#a": 1, "faq#b": 1}, k=5
    )
    assert not cases[1].has_gold and cases[1].gold_granularity == "chunk"
    assert cases[2].gold == {"x": 3, "y": 0, "z": -1} and cases[2].relevant_ids == ["x"]
    assert (cases[2].must_have, cases[2].intent_type, cases[2].difficulty, cases[2].tags) == (
        ["v2.3"],
        "howto",
        "hard",
        ["billing"],
    )


def test_cases_jsonl_round_trip(tmp_path):
    cases = round_trip(
        write(tmp_path / "cases.jsonl", "\ufeff" + CASES_JSONL + "\n\n"), "cases-jsonl", tmp_path
    )
    assert [c.case_id for c in cases] == ["L1", "L2", "named"]
    assert cases[0].gold == {"debian-ref/apt": 1} and cases[0].gold_granularity == "doc"
    assert cases[0].must_have == ["bookworm"] and cases[1].difficulty == "3"
    assert cases[2].gold == {"d1": 2, "d2": 1} and cases[2].k == 10


def test_beir_round_trip(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    write(folder / "corpus.jsonl", '{"_id": "d1", "title": "T", "text": "body"}\n')
    write(
        folder / "queries.jsonl",
        '{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "second"}\n'
        '{"_id": "train-only", "text": "not in this split"}\n',
    )
    write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td3\t0\n")
    cases = round_trip(folder, "beir", tmp_path)
    assert [c.case_id for c in cases] == ["q1", "q2"]
    assert cases[0].gold == {"d1": 1, "d2": 2} and cases[0].gold_granularity == "doc"


def test_beir_keeps_everything_a_case_has(tmp_path):
    cases = read_cases(write(tmp_path / "cases.json", CASES_JSON), "cases-json")
    write_cases(cases, tmp_path / "beir", "beir", corpus={"faq#a": {"title": "A", "text": "…"}})
    assert read_cases(tmp_path / "beir", "beir") == cases
    assert (tmp_path / "beir" / "corpus.jsonl").exists()


def test_trec_round_trip(tmp_path):
    qrels = write(tmp_path / "qrels.txt", "q1 0 c1 1\nq1 0 c2 2\n\nq2 0 c3 0\n")
    write(
        tmp_path / "qrels.txt.queries.tsv", "q1\tfirst query\nq2\tsecond\tquery with a tab\nq3\trefuse me\n"
    )
    cases = round_trip(qrels, "trec", tmp_path)
    assert [(c.case_id, c.gold) for c in cases] == [("q1", {"c1": 1, "c2": 2}), ("q2", {"c3": 0}), ("q3", {})]
    assert cases[1].query == "second\tquery with a tab"


def test_trec_qrels_and_run_round_trip(tmp_path):
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2}}
    write_trec_qrels(qrels, tmp_path / "qrels")
    assert read_trec_qrels(tmp_path / "qrels") == qrels
    rankings = {"q1": ["b", "a", "c"], "q2": []}
    write_trec_run(rankings, tmp_path / "run")
    run = read_trec_run(tmp_path / "run")
    assert run.rankings == {"q1": ["b", "a", "c"]}
    write_trec_run(run.rankings, tmp_path / "run2", scores=run.scores, tag=run.tag)
    assert read_trec_run(tmp_path / "run2") == run


def test_trec_run_is_ordered_by_score_and_ties_keep_file_order(tmp_path):
    path = write(tmp_path / "run", "q 0 z 1 1.0 t\nq Q0 b 1 2.5 t\nq Q0 a 2 2.5 t\nq Q0 c 3 3 t\n")
    run = read_trec_run(path)
    assert run.rankings == {"q": ["c", "b", "a", "z"]}
    assert run.scores == {"q": [3.0, 2.5, 2.5, 1.0]}
    assert len(run.warnings) == 1 and "tied scores" in run.warnings[0]


def test_granularity_override(tmp_path):
    cases = read_cases(write(tmp_path / "cases.json", CASES_JSON), "cases-json", granularity="doc")
    assert {c.gold_granularity for c in cases} == {"doc"}
    write_cases(cases, tmp_path / "out.json", "cases-json")
    assert "relevant_doc_ids" in (tmp_path / "out.json").read_text(encoding="utf-8")
    assert read_cases(tmp_path / "out.json", "cases-json") == cases


BAD_JSON_CASES = [
    (
        '[\n {"case_id": "a", "question": "q", "relevant_chunk_ids": ["c1",],}\n]',
        r"cases.json:2: not valid JSON",
    ),
    ('[\n {"case_id": "a", "question": "q", "relevant_chunk_ids": [NaN]}\n]', r"cases.json:2: .*NaN"),
    (
        '[{"case_id": "a", "question": "q", "relevant_chunk_ids": []},\n {"case_id": "b", "question": "q"}]',
        r"cases.json:2: field `relevant_chunk_ids` is missing; use \[\]",
    ),
    (
        '[\n\n {"case_id": "a", "question": "q", "query": "q", "relevant_chunk_ids": []}]',
        r"cases.json:3: field `query` cannot be given together with `question`; keep one",
    ),
    ('[\n {"case_id": "a", "relevant_chunk_ids": []}]', r"cases.json:2: field `question` is missing"),
    (
        '[{"case_id": "a", "question": "q", "relevant_chunk_id": ["c1"]}]',
        r"cases.json:1: unknown field 'relevant_chunk_id' \(did you mean 'relevant_chunk_ids'\?\); rename it",
    ),
    (
        '[{"case_id": "a", "question": "q", "relevant_chunk_ids": "c1"}]',
        r"field `relevant_chunk_ids` must be a list of ids or an object",
    ),
    (
        '[{"case_id": "a", "question": "q", "relevant_chunk_ids": [], "k": 0}]',
        r"field `k` must be a positive integer",
    ),
    (
        '[{"case_id": "a", "question": "q", "relevant_chunk_ids": []},\n{"case_id": "a", "question": "r", '
        '"relevant_chunk_ids": []}]',
        r"cases.json:2: field `case_id` 'a' was already used on line 1",
    ),
    ('{"case_id": "a"}', r"cases.json:1: expected a JSON array of cases"),
    (
        '[{"case_id": "a", "question": "q", "relevant_chunk_ids": ["x"], "grades": {"x": 0}}]',
        r"field `grades` gives 'x' grade 0 but it is listed as relevant",
    ),
]


def test_cases_json_as_teams_write_it_query_and_no_case_id(tmp_path):
    """A team's own eval file: `query` for `question`, no `case_id`, production's UUIDs as gold."""
    gold = ["3f0b0fe9-156a-436d-acd6-5c8c5d0fe192", "22874565-487b-4adc-b09f-8fee0d5b56ed"]
    path = write(
        tmp_path / "cases.json",
        json.dumps(
            [
                {"query": "磁盘告警怎么处理", "relevant_chunk_ids": gold},
                {"query": "如何重启服务", "relevant_chunk_ids": [42]},
            ],
            ensure_ascii=False,
        ),
    )
    cases = read_cases(path, "cases-json")
    assert [(c.case_id, c.query, c.gold) for c in cases] == [
        ("A1", "磁盘告警怎么处理", dict.fromkeys(gold, 1)),
        ("A2", "如何重启服务", {"42": 1}),
    ]
    assert [c.gold_granularity for c in cases] == ["chunk", "chunk"]


@pytest.mark.parametrize(("text", "message"), BAD_JSON_CASES)
def test_cases_json_errors_name_file_line_and_field(tmp_path, text, message):
    path = write(tmp_path / "cases.json", text)
    with pytest.raises(InputError, match=message):
        read_cases(path, "cases-json")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"query": "q", "positive_doc_ids": ["a",],}', r"cases.jsonl:2: not valid JSON"),
        ('{"query": "q"}', r"cases.jsonl:2: field `positive_doc_ids` is missing"),
        (
            '{"question": "q", "positive_doc_ids": []}',
            r"cases.jsonl:2: unknown field 'question'|field `query`",
        ),
        (
            '{"query": "q", "positive_doc_ids": [], "must_have_constraints": "v2"}',
            r'cases.jsonl:2: field `must_have_constraints` must be a list of strings; write \["v2"\]',
        ),
        ('{"query": 5.5, "positive_doc_ids": []}', r"cases.jsonl:2: field `query` must be a string"),
        ('["not", "an", "object"]', r"cases.jsonl:2: expected a JSON object"),
        ('{"query": "q", "positive_doc_ids": {"a": 1.5}}', r"field `positive_doc_ids` has a bad entry"),
    ],
)
def test_cases_jsonl_errors_name_file_line_and_field(tmp_path, line, message):
    path = write(tmp_path / "cases.jsonl", '{"query": "ok", "positive_doc_ids": []}\n' + line + "\n")
    with pytest.raises(InputError, match=message):
        read_cases(path, "cases-jsonl")


def test_unknown_extra_fields_are_reported_not_fatal(tmp_path):
    path = write(tmp_path / "cases.jsonl", '{"query": "q", "positive_doc_ids": [], "answer": "42"}\n')
    warnings: list[str] = []
    assert len(read_cases(path, "cases-jsonl", warnings=warnings)) == 1
    assert warnings == [f"{path}:1: field 'answer' is not part of the format and was ignored"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 0 c1\n", r"qrels:1: a qrels line has 4 columns"),
        ("q1 0 c1 1\nq1 Q0 c1 1 0.5 run\n", r"qrels:2: .*found 6 \(this looks like a TREC run line"),
        ("q1 0 c1 high\n", r"qrels:1: field `grade` must be an integer"),
        ("q1 0 c1 1\nq1 0 c1 2\n", r"qrels:2: 'c1' of query 'q1' is judged twice"),
    ],
)
def test_trec_qrels_errors(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_trec_qrels(write(tmp_path / "qrels", text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 c1 1 0.5\n", r"run:1: a run line has 6 columns"),
        ("q1 0 c1 1\n", r"run:1: .*\(this looks like a qrels line"),
        ("q1 Q0 c1 1 0.5 t\nq1 Q0 c2 2 nan t\n", r"run:2: field `score` must be a finite number"),
    ],
)
def test_trec_run_errors(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_trec_run(write(tmp_path / "run", text))


def test_trec_import_needs_query_texts(tmp_path):
    qrels = write(tmp_path / "qrels.txt", "q1 0 c1 1\n")
    with pytest.raises(InputError, match=r"qrels.txt.queries.tsv: not found"):
        read_cases(qrels, "trec")
    write(tmp_path / "topics.tsv", "q2\tother\n")
    with pytest.raises(InputError, match=r"no query text \(first: 'q1'\)"):
        read_cases(qrels, "trec", queries_path=tmp_path / "topics.tsv")


def test_trec_export_refuses_ids_with_spaces(tmp_path):
    with pytest.raises(InputError, match="whitespace"):
        write_cases([EvalCase(case_id="a b", query="q", gold={"c": 1})], tmp_path / "out", "trec")


def test_beir_errors(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    write(folder / "qrels" / "dev.tsv", "query-id\tcorpus-id\tscore\n")
    with pytest.raises(InputError, match=r"test.tsv: not found; splits here: dev \(pass --split\)"):
        read_cases(folder, "beir")
    write(folder / "queries.jsonl", '{"_id": "q1", "text": "x"}\n{"text": "no id"}\n')
    with pytest.raises(InputError, match=r"queries.jsonl:2: field `_id` is missing"):
        read_cases(folder, "beir", split="dev")
    write(folder / "queries.jsonl", '{"_id": "q1", "text": "x"}\n')
    write(folder / "qrels" / "dev.tsv", "query-id\tcorpus-id\tscore\nq1\td1\tyes\n")
    with pytest.raises(InputError, match=r"dev.tsv:2: field `score` must be an integer"):
        read_cases(folder, "beir", split="dev")
    write(folder / "qrels" / "dev.tsv", "q9\td1\t1\n")
    with pytest.raises(InputError, match=r"1 judged queries are not in queries.jsonl \(first: 'q9'\)"):
        read_cases(folder, "beir", split="dev")
    with pytest.raises(InputError, match="is a folder"):
        read_cases(folder / "queries.jsonl", "beir")


def test_unreadable_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_cases(tmp_path / "missing.json", "cases-json")


def test_the_format_is_told_by_the_content(tmp_path):
    from ragtriage.eval.formats import detect_case_format

    assert detect_case_format(write(tmp_path / "set.txt", "\ufeff  \n" + CASES_JSON)) == "cases-json"
    assert detect_case_format(write(tmp_path / "set.json", CASES_JSONL)) == "cases-jsonl"
    assert detect_case_format(write(tmp_path / "qrels", "q1 0 c1 1\nq1 0 c2 2\n")) == "trec"
    assert detect_case_format(write(tmp_path / "tabs.tsv", "q1\t0\tc1\t-1\n")) == "trec"
    (tmp_path / "beir").mkdir()
    assert detect_case_format(tmp_path / "beir") == "beir"
    with pytest.raises(InputError, match=r"notes\.md: not an eval set.*cases-json.*--format"):
        detect_case_format(write(tmp_path / "notes.md", "# my eval set\nq1: how to apt\n"))
