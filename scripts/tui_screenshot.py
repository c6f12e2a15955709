"""Write `docs/tui.svg`: the case screen of a flagged request in the demo home, replayed and diagnosed.

Usage:
    python scripts/tui_screenshot.py [--home DIR] [--out docs/tui.svg]

Runs `prepare_demo` on the home first (reused when already built), then drives the TUI with Pilot.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


async def shoot(home: Path, out: Path) -> None:
    from ragtriage.logs.queue import list_queue
    from ragtriage.tui.app import TriageApp
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home)
    app = TriageApp(workspace)
    async with app.run_test(size=(140, 42)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        page = list_queue(workspace.engine, suggested="alias_missing", limit=1)
        if not page.items:
            page = list_queue(workspace.engine, limit=1)
        app.screen.open_case(page.items[0].request_id)  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        app.clear_notifications()
        await pilot.pause()
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))
    workspace.close()


def main() -> None:
    from ragtriage_demo.demo import prepare_demo

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, default=Path(tempfile.gettempdir()) / "ragtriage-demo")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "tui.svg")
    args = parser.parse_args()
    prepare_demo(args.home)
    asyncio.run(shoot(args.home.resolve(), args.out))
    print(args.out)


if __name__ == "__main__":
    main()
