"""The JSON Schemas in `schemas/` match the models, and real traces validate against them."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import (
    Candidate,
    RerankPair,
    RewriteResult,
    RouteResult,
    RunOptions,
    StageRank,
    Trace,
)
from tests.conftest import REPO_ROOT, load_script

GEN = load_script("gen_schemas")


@pytest.mark.parametrize("name", sorted(GEN.SCHEMAS))
def test_schema_file_is_in_sync_with_the_model(name: str) -> None:
    path = REPO_ROOT / "schemas" / name
    assert path.exists(), f"schemas/{name} is missing; run scripts/gen_schemas.py"
    expected = GEN.expected_files()[name]
    assert path.read_text(encoding="utf-8") == expected, (
        f"schemas/{name} is stale; run scripts/gen_schemas.py"
    )


def _trace_schema() -> dict[str, object]:
    schema: dict[str, object] = json.loads(
        (REPO_ROOT / "schemas" / "trace.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def _full_trace() -> Trace:
    return Trace(
        query="Ｅ１００１ 报错",
        rewrite=RewriteResult(
            raw_query="Ｅ１００１ 报错",
            normalized_query="E1001 报错",
            rewritten_query="E1001 报错 错误",
            aliases={"报错": ["错误"]},
            sub_queries=[],
            mode="rules",
        ),
        routes=[
            RouteResult(
                name="bm25_raw",
                kind="bm25",
                query="E1001 报错",
                hits=[ScoredChunk(chunk_id="c1", rank=1, score=3.5)],
                ms=1.2,
            )
        ],
        fused=[ScoredChunk(chunk_id="c1", rank=1, score=1 / 61)],
        rerank_input=["c1"],
        reranked=[ScoredChunk(chunk_id="c1", rank=1, score=0.9)],
        rerank_pairs=[
            RerankPair(chunk_id="c1", cross_encoder_score=0.8, features={"rrf": 1 / 61}, score=0.9)
        ],
        final=["c1"],
        candidates=[
            Candidate(
                chunk_id="c1",
                doc_id="d",
                routes={"bm25_raw": StageRank(rank=1, score=3.5)},
                fused=StageRank(rank=1, score=1 / 61),
                is_selected=True,
                final_rank=1,
            )
        ],
        timings_ms={"total": 3.0},
        run_options=RunOptions(top_n=3),
    )


def test_trace_json_validates_and_a_wrong_one_does_not() -> None:
    schema = _trace_schema()
    document = json.loads(_full_trace().model_dump_json())
    jsonschema.validate(document, schema)
    document["routes"][0]["hits"][0]["rank"] = "first"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "q"}, schema)  # no rewrite
