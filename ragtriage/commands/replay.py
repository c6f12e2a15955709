"""`ragtriage replay` commands."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Attach this module's commands to the root group."""
