"""ragtriage: on-call triage of RAG retrieval badcases."""

__version__ = "0.1.0"
