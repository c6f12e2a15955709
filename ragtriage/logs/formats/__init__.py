"""Trace formats other than request-log lines: OTLP/JSON with OpenInference attributes, Arize
Phoenix span exports and Langfuse exports.

Each format module turns its input into `Span`s (`spans.py`); `collect.py` groups the spans of
one trace across lines and files with bounded memory; `assemble.py` turns one trace into a
schema-v1 `RequestLog` body (or a reason it cannot be one); `read.py` runs the three for an
ingest; `detect.py` tells the format of a file by its content.
"""
