"""Wording helpers for the CLI's output (`ragtriage.wording`, re-exported where the renderers look)."""

from __future__ import annotations

from ragtriage.wording import page_range, plural, plural_noun

__all__ = ["page_range", "plural", "plural_noun"]
