"""SQL store (SQLModel): KB, request logs, triage records, eval sets and runs."""
