"""Online request logs and traces into the triage store, and the triage queue over them.

`ingest` reads schema-v1 and flat JSONL, Parquet and CSV exports, and OTLP / Phoenix / Langfuse traces
(`formats/`) into one request record (`schema`), flags badcases (`flagging`), and writes in batches,
counting every line once; `requests` reads stored requests and quarantined lines back; `queue` lists
the flagged ones.
"""
