"""Trace formats other than request-log lines: OTLP/JSON with OpenInference attributes (and the
OpenTelemetry SDK's own JSON), Arize Phoenix span exports and Langfuse exports; and `detect`,
which tells any input file's format and layout by its content.

Each format module turns its records into `Span`s and `Note`s (`spans.py`); `read.py` groups the
spans of one trace across lines and files and `assemble.py` turns each trace into a schema-v1
request body (or a reason it cannot be one). The Parquet and CSV readers (`tables.py`) give
request-log rows.
"""
