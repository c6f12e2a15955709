.PHONY: install test check lint typecheck schemas bench snap-update

install:
	pip install torch==2.13.0
	pip install -e ".[dev]"

test:
	python -m pytest -n 2 -q

lint:
	ruff check .
	lint-imports

typecheck:
	mypy

check: lint typecheck test

schemas:
	python scripts/gen_schemas.py

snap-update:
	python -m pytest tests/tui --snapshot-update
