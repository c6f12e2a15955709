"""Load a team's own stages (`[stages.NAME] use = …`) and call them under the contracts of `stages`.

`use = "package.module:attribute"` is imported (the settings file's folder is searched too, as
uvicorn's `--app-dir` does); a `use` without a colon names an entry point of the group
`ragtriage.stages`. A class is instantiated with the table's other keys; a function gets them as
keyword arguments on every call. Every failure, whether to import, to build, to call or a return
of the wrong shape, is one `PipelineError` line naming the profile, the stage, the import string
and the fix.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from ragtriage.config.settings import Settings, StageSpec
from ragtriage.errors import PipelineError
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.stages import Rewrite, Selection
from ragtriage.pipeline.types import Retriever

ENTRY_POINT_GROUP = "ragtriage.stages"
ROUTE_STAGES = ("bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten", "dense_sub")
#: The whole pipeline of a framework, loaded by `ragtriage.replay.framework`, not here.
WHOLE_PIPELINE = "pipeline"


class StageCannotTake(PipelineError):
    """A one-off change (a counterfactual) that a team's stage cannot take; said, never replaced by a built-in."""

    title = "not available"


@dataclass(frozen=True)
class TeamStage:
    """One loaded team stage: call it with the contract's arguments; errors name where it came from."""

    stage: str
    use: str
    profile: str
    call: Callable[..., Any]

    @property
    def label(self) -> str:
        """`profile v2, stage rerank ("prod_rag.search:rerank")`."""
        return f'profile {self.profile}, stage {self.stage} ("{self.use}")'

    def accepts(self, keyword: str) -> bool:
        """Whether the stage takes this keyword argument (e.g. a rewrite's `aliases`)."""
        try:
            parameters = inspect.signature(self.call).parameters.values()
        except (TypeError, ValueError):
            return False
        return any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.call(*args, **kwargs)
        except PipelineError:
            raise
        except Exception as error:
            raise PipelineError(
                f"{self.label} raised {type(error).__name__}: {first_line(error)}; fix the stage, "
                f"or replay with a profile that does not use it"
            ) from error

    def cannot_take(self, what: str, how: str) -> StageCannotTake:
        return StageCannotTake(f"{self.label} cannot take {what}; {how}")

    # ------------------------------------------------------------ returns, checked

    def hits(self, value: Any) -> list[ScoredChunk]:
        """A route, fusion or rerank stage's return as ranked chunks (rank from 1)."""
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise self._shape(value, "a list of (chunk_id, score) pairs, best first")
        chunks: list[ScoredChunk] = []
        for position, item in enumerate(value, start=1):
            if isinstance(item, (tuple, list)) and len(item) == 2:
                chunk_id, score = item
            else:
                chunk_id, score = item, 0.0
            if not isinstance(chunk_id, (str, int, UUID)) or isinstance(chunk_id, bool):
                raise self._shape(
                    item, "(chunk_id, score) pairs whose chunk_id is a str, int or UUID", position
                )
            if not isinstance(score, (int, float)) or isinstance(score, bool):
                raise self._shape(item, "(chunk_id, score) pairs whose score is a number", position)
            chunks.append(ScoredChunk(chunk_id=str(chunk_id), rank=position, score=float(score)))
        return chunks

    def rewrite(self, value: Any) -> Rewrite:
        if isinstance(value, str):
            return Rewrite(query=value)
        if isinstance(value, Rewrite):
            return value
        raise self._shape(value, "the rewritten query (a str) or a ragtriage.pipeline.stages.Rewrite")

    def selection(self, value: Any) -> Selection:
        if isinstance(value, Selection):
            return Selection([str(c) for c in value.final], value.refused, value.reason)
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return Selection([str(c) for c in value])
        raise self._shape(value, "the final context's chunk ids, or a ragtriage.pipeline.stages.Selection")

    def _shape(self, value: Any, expected: str, position: int | None = None) -> PipelineError:
        where = f" at position {position}" if position is not None else ""
        return PipelineError(
            f"{self.label} returned {_describe(value)}{where}; the contract is {expected} "
            f"(ragtriage.pipeline.stages)"
        )


@dataclass
class TeamRoute:
    """A team's route stage as the pipeline's `Retriever`: it searches with the text production's
    route got (not normalised) and records no flags."""

    stage: TeamStage
    kind: Literal["bm25", "dense"]

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        return self.stage.hits(self.stage(query, k)), []


def team_routes(stages: Mapping[str, TeamStage]) -> dict[str, tuple[str, Retriever]]:
    """Route name → (the stage's import string, its `Retriever`), for the route stages among `stages`."""
    return {
        name: (stage.use, TeamRoute(stage, "bm25" if name.startswith("bm25") else "dense"))
        for name, stage in stages.items()
        if name in ROUTE_STAGES
    }


def load_stages(settings: Settings, profile: str) -> dict[str, TeamStage]:
    """Stage name → the team's stage, for every `[stages.NAME]` of these (one profile's) settings.

    Raises:
        PipelineError: a stage cannot be imported or built (the line names profile, stage, import string and fix).
    """
    search_path = settings.config_file.parent if settings.config_file is not None else None
    return {
        stage: load_stage(stage, spec, profile=profile, search_path=search_path)
        for stage, spec in settings.stages.items()
        if stage != WHOLE_PIPELINE
    }


def load_stage(stage: str, spec: StageSpec, *, profile: str, search_path: Path | None = None) -> TeamStage:
    """Import `spec.use` and build the stage with its options (see the module docstring)."""
    label = f'profile {profile}, stage {stage} ("{spec.use}")'
    target = resolve_import(spec.use, label, search_path)
    options = spec.options()
    if inspect.isclass(target):
        try:
            built = target(**options)
        except Exception as error:
            raise PipelineError(
                f"{label}: building it with {_keys(options)} raised {type(error).__name__}: "
                f"{first_line(error)}; fix the [stages.{stage}] keys or the class"
            ) from error
        call = built
    else:
        call = functools.partial(target, **options) if options else target
    if not callable(call):
        raise PipelineError(
            f"{label} is {_describe(call)}, not a function or a class; name a callable in [stages.{stage}] use"
        )
    return TeamStage(stage=stage, use=spec.use, profile=profile, call=call)


def resolve_import(use: str, label: str, search_path: Path | None) -> Any:
    """The object `use` names: `package.module:attribute`, or an entry point of `ragtriage.stages`.

    Raises:
        PipelineError: it cannot be imported (the line starts with `label` and says how to fix it).
    """
    if ":" not in use:
        found = entry_points(group=ENTRY_POINT_GROUP, name=use)
        if not found:
            raise PipelineError(
                f"{label}: no entry point '{use}' in the group {ENTRY_POINT_GROUP}; write "
                f'use = "package.module:attribute", or install the package that declares it'
            )
        try:
            return next(iter(found)).load()
        except Exception as error:
            raise PipelineError(
                f"{label}: loading the entry point raised {type(error).__name__}: {first_line(error)}"
            ) from error
    module_name, _, attribute = use.partition(":")
    if search_path is not None and str(search_path) not in sys.path:
        sys.path.append(str(search_path))
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise PipelineError(
            f"{label}: cannot import {module_name} ({first_line(error)}); install the package or put it "
            f"beside the settings file, or fix [stages] use"
        ) from error
    except Exception as error:
        raise PipelineError(
            f"{label}: importing {module_name} raised {type(error).__name__}: {first_line(error)}"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        if not part or not hasattr(target, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))[:12]
            raise PipelineError(
                f"{label}: {module_name} has no attribute '{attribute}' (it has: {', '.join(public) or 'nothing'}); "
                f"fix [stages] use"
            )
        target = getattr(target, part)
    return target


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (None)"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def _keys(options: Mapping[str, Any]) -> str:
    return ", ".join(sorted(options)) if options else "no keys"


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
