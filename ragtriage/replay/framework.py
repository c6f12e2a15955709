"""Replay a team's whole LlamaIndex or LangChain pipeline in process (`[stages.pipeline]`).

    [profiles.main.stages.pipeline]
    use = "prod_rag.app:build_query_engine"   # the team's factory (an entry point name works too)
    framework = "llama-index"                 # or "langchain"; left out: told by what the factory returns
    top_k = 5                                 # every other key is passed to the factory

The factory is called once per profile. What it returns runs each query: `.query(text)` (a
LlamaIndex query engine), `.retrieve(text)` (a LlamaIndex retriever), `.invoke(text)` (a LangChain
retriever or runnable), or a plain call. The framework's own OpenInference instrumentor records the
run into an in-memory exporter of the OpenTelemetry SDK, and those spans are read by the code that
reads production's traces in `logs ingest` (`logs.formats`), under the same `[logs.otel]` settings:
the replayed stages have the logged stages' shape, names and chunk ids by construction.

A one-off change the team's code cannot take (a larger k, rerank off, another rewrite, aliases) is
a `StageCannotTake`, never run on ragtriage's built-in stages instead.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ragtriage.config.settings import OtelSettings, Settings, StageSpec
from ragtriage.errors import PipelineError
from ragtriage.logs.formats.assemble import Assembled, Rejected, assemble
from ragtriage.logs.formats.otel_sdk import span_from_sdk
from ragtriage.logs.schema import RequestLog, to_trace
from ragtriage.pipeline.pipeline import WholeRun
from ragtriage.pipeline.stage_loading import StageCannotTake, first_line, resolve_import
from ragtriage.pipeline.types import RunOptions, Trace

FRAMEWORKS = ("llama-index", "langchain")
_SOURCE = "<replay>"


def whole_pipeline(settings: Settings, profile: str) -> WholeRun | None:
    """The team's whole pipeline these (one profile's) settings name in `[stages.pipeline]`, or None.

    Raises:
        PipelineError: the factory cannot be imported or called, or the framework or its
            instrumentor is not installed (the line names the profile, the import string and the fix).
    """
    spec = settings.stages.get("pipeline")
    if spec is None:
        return None
    search_path = settings.config_file.parent if settings.config_file is not None else None
    return _FrameworkRun(spec, profile, settings.logs.otel, search_path)


class _FrameworkRun:
    """Runs one query through the team's built pipeline and reads the spans it emitted."""

    def __init__(self, spec: StageSpec, profile: str, otel: OtelSettings, search_path: Any) -> None:
        self.label = f'profile {profile}, stage pipeline ("{spec.use}")'
        self.use = spec.use
        self.otel = otel
        options = spec.options()
        wanted = options.pop("framework", None)
        if wanted is not None and wanted not in FRAMEWORKS:
            raise PipelineError(
                f"{self.label}: framework = {json.dumps(wanted)} is not one of {', '.join(FRAMEWORKS)}"
            )
        factory = resolve_import(spec.use, self.label, search_path)
        if not callable(factory):
            raise PipelineError(
                f"{self.label} is not a function or a class; name the factory that builds the pipeline"
            )
        framework = wanted
        if framework is not None:
            self.tracing = _tracing(framework, self.label)
        try:
            self.built = factory(**options)
        except Exception as error:
            raise PipelineError(
                f"{self.label}: the factory raised {type(error).__name__}: {first_line(error)}"
            ) from error
        if framework is None:
            framework = _framework_of(self.built, self.label)
            self.tracing = _tracing(framework, self.label)
        self.framework = framework

    def __call__(self, query: str, options: RunOptions) -> Trace:
        changed = options.model_dump(exclude_defaults=True, exclude={"as_of"})
        if changed:
            raise StageCannotTake(
                f"{self.label} cannot take {', '.join(sorted(changed))}: the team's {self.framework} pipeline "
                f"runs as it was built; compare with another profile instead"
            )
        instrumentor, provider, exporter = self.tracing
        if instrumentor.is_instrumented_by_opentelemetry:
            raise PipelineError(
                f"{self.label}: the {self.framework} instrumentor is already on in this process (another tracer "
                f"provider records it), so the replay cannot read its spans; replay from a process of its own"
            )
        exporter.clear()
        # Instrumented for this run only: the process's other users of the framework stay as they were.
        instrumentor.instrument(tracer_provider=provider)
        try:
            self._run(query)
        except Exception as error:
            raise PipelineError(
                f"{self.label} raised {type(error).__name__} on the query: {first_line(error)}"
            ) from error
        finally:
            instrumentor.uninstrument()
        return self._trace(query, exporter.get_finished_spans())

    def _run(self, query: str) -> Any:
        built = self.built
        for method in ("query", "retrieve", "invoke"):
            if callable(getattr(built, method, None)):
                return getattr(built, method)(query)
        if callable(built):
            return built(query)
        raise PipelineError(
            f"{self.label}: the factory returned a {type(built).__name__}, which has no query, retrieve or "
            f"invoke method and cannot be called; return the query engine or retriever"
        )

    def _trace(self, query: str, finished: Any) -> Trace:
        spans = [
            span_from_sdk(json.loads(span.to_json(indent=None)), _SOURCE, number)
            for number, span in enumerate(finished, start=1)
        ]
        if not spans:
            raise PipelineError(
                f"{self.label}: the {self.framework} instrumentor recorded no span; is another tracer "
                f"provider instrumenting the framework in this process?"
            )
        # One query is one trace; the newest root's trace is this run's.
        trace_id = spans[-1].trace_id
        assembled = assemble(trace_id, [s for s in spans if s.trace_id == trace_id], [], self.otel)
        if isinstance(assembled, Rejected):
            raise PipelineError(
                f"{self.label}: its spans cannot be read as a request: {assembled.message}; {assembled.fix}"
            )
        if not isinstance(assembled, Assembled):
            raise PipelineError(
                f"{self.label}: its spans hold no retrieval, only feedback; is the factory's object traced?"
            )
        record = RequestLog.model_validate_json(assembled.body)
        trace = to_trace(record)
        trace.query = query
        # A pipeline whose spans show no rewrite did not rewrite: `off`, as a logged request says `none`.
        mode = "stage" if record.rewrite is not None else "off"
        trace.rewrite = trace.rewrite.model_copy(update={"mode": mode, "raw_query": query})
        for route in trace.routes:
            route.flags = [f for f in route.flags if f != "logged"]
        trace.flags = [f for f in trace.flags if f != "logged"]
        trace.not_logged = []
        trace.rerank_mode = f"{self.framework}:{self.use}"
        return trace


def _framework_of(built: Any, label: str) -> str:
    module = type(built).__module__
    if module.startswith("llama_index"):
        return "llama-index"
    if module.startswith("langchain"):
        return "langchain"
    raise PipelineError(
        f"{label}: the factory returned a {type(built).__name__} from {module}, neither LlamaIndex nor LangChain; "
        f'set framework = "llama-index" or "langchain" in the table, or name each stage instead'
    )


def _tracing(framework: str, label: str) -> tuple[Any, Any, Any]:
    try:
        return _instrumentor(framework)
    except ImportError as error:
        raise PipelineError(
            f"{label}: replaying a {framework} pipeline needs openinference-instrumentation-{framework} "
            f'({first_line(error)}); pip install "ragtriage[frameworks]"'
        ) from error


@functools.cache
def _instrumentor(framework: str) -> tuple[Any, Any, Any]:
    """The framework's OpenInference instrumentor, and the tracer provider and in-memory exporter
    each replayed query is recorded with (made once per process).

    Raises:
        ImportError: the instrumentor (or the SDK) is not installed.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    instrumentor: Any
    if framework == "llama-index":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        instrumentor = LlamaIndexInstrumentor()
    else:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor = LangChainInstrumentor()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return instrumentor, provider, exporter
