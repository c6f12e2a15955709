"""The SQL store (SQLModel, SQLite or PostgreSQL): every table and every SQL statement.

Tables for the KB, request logs and quarantine, triage records and their audit, eval sets and runs,
replay fidelity and the monitor cache (`*_tables`); repositories that read and write them
(`kb_repo`, `triage_repo`, `eval_repo`, `ingest_sql`, `monitor_sql`); engines and sessions (`db`).
"""
