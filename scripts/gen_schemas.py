"""Write the JSON Schemas in `schemas/` from the pydantic models (a test keeps them in sync).

Usage: `.venv/bin/python scripts/gen_schemas.py` (add `--check` to fail instead of writing).
To publish another model, add one entry to `SCHEMAS`: file name → "module:Class".
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = REPO_ROOT / "schemas"

#: schema file name → "module:Class" of a pydantic model.
SCHEMAS: dict[str, str] = {
    "trace.schema.json": "ragtriage.pipeline.types:Trace",
    "request_log.schema.json": "ragtriage.logs.schema:RequestLog",
}


def schema_for(target: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the model named `module:Class`, with `$schema` and `$id`."""
    module_name, class_name = target.split(":")
    model = getattr(importlib.import_module(module_name), class_name)
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://ragtriage.invalid/schemas/{class_name.lower()}.schema.json",
    }
    schema.update(model.model_json_schema())
    return schema


def render(schema: dict[str, Any]) -> str:
    """The exact text written to disk (stable key order, UTF-8, trailing newline)."""
    return json.dumps(schema, ensure_ascii=False, indent=2) + "\n"


def expected_files() -> dict[str, str]:
    """File name → the text it should hold."""
    return {name: render(schema_for(target)) for name, target in SCHEMAS.items()}


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) every schema file; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale files instead of writing them")
    args = parser.parse_args(argv)
    stale = []
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, text in expected_files().items():
        path = SCHEMA_DIR / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"stale schemas: {', '.join(stale)}; run scripts/gen_schemas.py", file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote schemas/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
