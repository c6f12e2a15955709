"""Imports every table module so that `SQLModel.metadata` knows them all."""

from __future__ import annotations

from ragtriage.store.eval_tables import *  # noqa: F401,F403
from ragtriage.store.fidelity_tables import *  # noqa: F401,F403
from ragtriage.store.kb_tables import *  # noqa: F401,F403
from ragtriage.store.log_tables import *  # noqa: F401,F403
from ragtriage.store.monitor_tables import *  # noqa: F401,F403
