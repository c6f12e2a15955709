"""The log reader: every bad-input kind, BOM, U+2028, GB18030, gzip, strict mode, repeated keys."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.merge import merge_request
from ragtriage.logs.reader import (
    BadLine,
    LogLine,
    iter_raw_lines,
    parse_line,
    read_log,
)
from ragtriage.logs.schema import RequestLog


def _bad(raw: bytes, *, unterminated: bool = False) -> BadLine:
    parsed = parse_line(raw, 7, unterminated=unterminated)
    assert isinstance(parsed, BadLine), parsed
    return parsed


def _good(raw: bytes) -> LogLine:
    parsed = parse_line(raw, 1)
    assert isinstance(parsed, LogLine), parsed
    return parsed


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b'{"request_id":"a","raw_query":"q","latency_ms":NaN}', "nan"),
        (b'{"request_id":"a","raw_query":"q","latency_ms":-Infinity}', "nan"),
        (b'{"a":["c1",],}', "trailing_comma"),
        (b'{"request_id":"a","raw_query":"q",}', "trailing_comma"),
        (b'{"request_id":"a","raw_query":"q","raw_query":"r"}', "duplicate_key"),
        (b'{"request_id":"a","raw_query":"q","stages":{"bm25":["c1"],"bm25":["c2"]}}', "duplicate_key"),
        (b"[1, 2]", "not_object"),
        (b'"just a string"', "not_object"),
        (b"null", "not_object"),
        (b'{"raw_query":"q"}', "missing_field"),
        (b'{"request_id":"a"}', "missing_field"),
        (b'{"request_id":"a","raw_query":"q","stages":{"bm25":5}}', "invalid_field"),
        (b'{"request_id":"a","raw_query":"q","stages":{"bm25":[{"score":1}]}}', "missing_field"),
        (
            b'{"request_id":"a","raw_query":"q","stages":{"bm25":[{"chunk_id":"c","score":"high"}]}}',
            "invalid_field",
        ),
        (b'{"request_id":"","raw_query":"q"}', "invalid_field"),
        (b'{"request_id":"a","raw_query":"\x80\xff"}', "bad_encoding"),
        (b'{"request_id":"a","raw_query":"\\ud800"}', "bad_encoding"),
        (b'{"request_id":"a" "raw_query":"q"}', "invalid_json"),
    ],
)
def test_bad_lines_name_their_kind_line_and_fix(raw: bytes, kind: str) -> None:
    bad = _bad(raw)
    assert bad.kind == kind
    assert bad.raw == raw
    message = bad.describe("logs/x.jsonl")
    assert message.startswith("logs/x.jsonl:7: ") and " — " in message


def test_duplicate_key_even_when_spaced_like_json_dumps() -> None:
    raw = json.dumps({"request_id": "a", "raw_query": "q"}).encode()[:-1] + b', "raw_query": "again"}'
    assert _bad(raw).kind == "duplicate_key"
    spaced = b'{"request_id" : "a", "raw_query" : "q", "raw_query" : "r"}'
    assert _bad(spaced).kind == "duplicate_key"


def test_a_cut_off_last_line_is_truncated_and_a_complete_one_is_fine() -> None:
    assert _bad(b'{"request_id":"a","raw_query":"\xe5\x86\x99', unterminated=True).kind == "truncated"
    assert isinstance(parse_line(b'{"request_id":"a","raw_query":"q"}', 3, unterminated=True), LogLine)


def test_blank_lines_and_a_bom_only_line_are_blank() -> None:
    for raw in (b"", b"   ", b"\t\r", b"\xef\xbb\xbf"):
        assert parse_line(raw, 1) is None


def test_bom_before_the_first_record_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"request_id":"a","raw_query":"q"}\n{"request_id":"b","raw_query":"r"}\n')
    records = list(read_log(path, strict=True))
    assert [r.request_id for r in records if isinstance(r, LogLine)] == ["a", "b"]


def test_u2028_inside_a_value_is_not_a_line_break(tmp_path: Path) -> None:
    path = tmp_path / "ls.jsonl"
    query = "第一行\u2028第二行\u2029第三段\x85"
    path.write_bytes(json.dumps({"request_id": "a", "raw_query": query}, ensure_ascii=False).encode() + b"\n")
    (line,) = list(read_log(path, strict=True))
    assert isinstance(line, LogLine) and line.raw_query == query and line.line_no == 1


def test_gb18030_line_is_recovered() -> None:
    raw = json.dumps({"request_id": "g", "raw_query": "打印机无法使用"}, ensure_ascii=False).encode("gb18030")
    line = _good(raw)
    assert line.recovered and line.raw_query == "打印机无法使用"
    assert RequestLog.model_validate_json(line.body).raw_query == "打印机无法使用"


def test_crlf_line_endings_are_accepted() -> None:
    assert _good(b'{"request_id":"a","raw_query":"q"}\r').request_id == "a"


def test_timestamps_are_normalized_to_utc_and_the_body_keeps_the_line_as_logged() -> None:
    raw = b'{"request_id":"a","raw_query":"q","ts":"2026-11-02T08:00:00+08:00"}'
    line = _good(raw)
    assert line.ts is not None and line.ts.isoformat() == "2026-11-02T00:00:00+00:00"
    assert line.body == raw
    naive = _good(b'{"request_id":"a","raw_query":"q","ts":"2026-11-02 08:00:00"}')
    assert naive.ts is not None and naive.ts.hour == 8 and naive.ts.utcoffset() is not None
    epoch = _good(b'{"request_id":"a","raw_query":"q","ts":1762070400}')
    assert epoch.ts is not None and epoch.ts.year == 2025


def test_columns_come_from_feedback_and_citations() -> None:
    line = _good(
        b'{"request_id":"a","raw_query":"q","citations":[],"answer":"x",'
        b'"feedback":{"rating":2,"escalated":true,"follow_up":"and then?"},"confidence":0.2}'
    )
    assert (line.rating, line.escalated, line.follow_up_marked, line.citations_empty) == (
        "2",
        True,
        True,
        True,
    )
    assert line.confidence == 0.2


def test_iter_raw_lines_reads_gzip_and_marks_the_unterminated_last_line(tmp_path: Path) -> None:
    data = b'{"request_id":"a","raw_query":"q"}\n\n{"request_id":"b"'
    plain, packed = tmp_path / "x.jsonl", tmp_path / "x.jsonl.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    expected = [
        (1, b'{"request_id":"a","raw_query":"q"}', False),
        (2, b"", False),
        (3, b'{"request_id":"b"', True),
    ]
    assert list(iter_raw_lines(plain)) == expected
    assert list(iter_raw_lines(packed)) == expected


def test_a_cut_gzip_stream_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"request_id":"a","raw_query":"q"}\n' * 2000)[:-20])
    with pytest.raises(InputError, match="cut.jsonl.gz"):
        list(iter_raw_lines(path))


def test_strict_mode_raises_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "req.jsonl"
    path.write_bytes(b'{"request_id":"a","raw_query":"q"}\n{"a":["c1",],}\n')
    with pytest.raises(LogFormatError, match=r"req\.jsonl:2: trailing comma"):
        list(read_log(path, strict=True))
    lenient = list(read_log(path))
    assert [type(x).__name__ for x in lenient] == ["LogLine", "BadLine"]


# ---------------------------------------------------------------- repeated keys

_text = st.text(alphabet='ab中\u2028 "\\:', max_size=5)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    _text,
)
_ids = st.one_of(_text, _text, _text, st.integers())
_stage_items = st.one_of(
    st.lists(_ids, max_size=4),
    st.lists(st.fixed_dictionaries({"chunk_id": _ids}, optional={"score": _scalars}), max_size=4),
    st.lists(st.one_of(_ids, st.fixed_dictionaries({"chunk_id": _ids})), max_size=3),
)
_records = st.fixed_dictionaries(
    {"request_id": _ids, "raw_query": st.one_of(_text, _text, _text, st.integers(), st.none())},
    optional={
        "ts": st.one_of(
            st.none(),
            st.integers(0, 2_000_000_000),
            st.sampled_from(
                [
                    "2026-11-02T08:00:00Z",
                    "2026-11-02",
                    "bad",
                    "2026-11-02T08:00",
                    "2026-11-02T08:00:00.123456+08:00",
                    "2026-11-02 08:00:00",
                    "2026-11-02T08:00:00.1Z",
                    "20261102T080000Z",
                ]
            ),
        ),
        "schema_version": _scalars,
        "kb": _scalars,
        "user": _scalars,
        "confidence": _scalars,
        "pipeline_version": _scalars,
        "session": _scalars,
        "answer": _scalars,
        "latency_ms": _scalars,
        "stages": st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["bm25", "dense", "final_context", "x"]), _stage_items)
        ),
        "citations": st.one_of(st.none(), _stage_items),
        "rewrite": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "keywords": st.lists(_scalars, max_size=2),
                    "mode": _scalars,
                    "aliases": st.one_of(
                        _scalars,
                        st.lists(_scalars, max_size=2),
                        st.dictionaries(_text, st.lists(_scalars, max_size=2), max_size=2),
                    ),
                },
            ),
        ),
        "feedback": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "rating": _scalars,
                    "escalated": _scalars,
                    "follow_up": _scalars,
                    "reason": _scalars,
                },
            ),
        ),
        "bm25_results": _stage_items,
        "extra": st.one_of(_scalars, st.dictionaries(_text, _scalars, max_size=2)),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records, st.sampled_from(["request_id", "raw_query", "extra", "ts"]), _scalars, st.booleans())
def test_an_injected_duplicate_key_is_always_caught(
    record: dict[str, Any], key: str, value: Any, nested: bool
) -> None:
    record = {**record, "feedback": {"rating": "down"}, key: record.get(key, "x")}
    raw = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    duplicate = json.dumps(value).encode()
    if nested:
        raw = raw.replace(
            b'"feedback":{"rating":"down"', b'"feedback":{"rating":"down","rating":' + duplicate, 1
        )
    else:
        raw = raw[:-1] + b',"' + key.encode() + b'":' + duplicate + b"}"
    parsed = parse_line(raw, 1)
    assert isinstance(parsed, BadLine) and parsed.kind == "duplicate_key"


def test_same_request_ignores_spacing_key_order_time_zone_and_flat_form() -> None:
    logged = b'{"request_id":"a","raw_query":"q","ts":"2026-11-02T08:00:00+08:00","bm25_results":["c1"]}'
    reformatted = (
        b'{"raw_query": "q", "request_id": "a", "ts": "2026-11-02T00:00:00Z", "stages": {"bm25": ["c1"]}}'
    )
    assert merge_request(logged, reformatted).outcome == "duplicate"
    assert merge_request(logged, logged.decode()).outcome == "duplicate"
    assert merge_request(logged, logged.replace(b'"q"', b'"other"')).conflicts == ["raw_query"]
    assert merge_request(logged, logged.replace(b"08:00:00+08:00", b"08:00:00Z")).conflicts == ["ts"]


def test_the_body_is_the_line_with_unknown_fields_nested_or_not() -> None:
    raw = b'{"request_id":"a","raw_query":"q","trace":{"span":"s1","tags":{"x":[1,2]}},"model":"m"}'
    line = _good(raw)
    assert line.body == raw
    assert line.record().model_extra == {"trace": {"span": "s1", "tags": {"x": [1, 2]}}, "model": "m"}
