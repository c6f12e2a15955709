"""The service face: a REST API (FastAPI, served by uvicorn) and self-contained HTML reports.

It calls the same core functions as the CLI and the TUI; the headless core never imports it.
"""
