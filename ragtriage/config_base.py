"""`StrictModel`, the base of every settings section (kept apart so section modules can share it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base of every settings section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
