"""The report file and pages served by `ragtriage serve`, rendered in headless Chromium (Debian's
/usr/bin/chromium driven by Playwright; `playwright install` is never used): the charts are in the
DOM, no request leaves the machine, Chinese renders with real glyphs, the screenshot is not blank."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.service_home import EvalHome, serve

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
#: Set to rewrite docs/report.png (shown in the README) from the comparison report.
SCREENSHOT_ENV = "RAGTRIAGE_UPDATE_SCREENSHOT"
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "report.png"
#: Flags for a quiet, isolated headless browser that phones nowhere by itself.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Draws two different CJK characters in the page's font and compares the pixels: a missing font
#: draws the same "tofu" box for both.
CJK_GLYPHS_DIFFER = """() => {
  const font = '32px ' + getComputedStyle(document.body).fontFamily;
  const draw = (ch) => {
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = 40;
    const ctx = canvas.getContext('2d');
    ctx.font = font; ctx.fillText(ch, 2, 32);
    return Array.from(ctx.getImageData(0, 0, 40, 40).data).join(',');
  };
  return draw('财') !== draw('务') && draw('财') !== draw('');
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A Chromium context on a fresh profile, or a skip saying why there is none."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: `apt-get install chromium` (.ci/run installs it where apt works)"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    profile = Path(tempfile.mkdtemp(prefix="ragtriage-chromium-"))
    try:
        with sync_api.sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(profile),
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1200, "height": 900},
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _cjk_font_installed() -> bool:
    try:
        result = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return bool(result.stdout.strip())


def _open(browser: Any, url: str) -> tuple[Any, list[str]]:
    """A new page at `url` and the list every request it makes is appended to."""
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(url, wait_until="load")
    return page, requests


def _foreign(requests: list[str], origin: str) -> list[str]:
    """Requests to anywhere but `origin` (and the page's own inline data)."""
    return [
        url
        for url in requests
        if not url.startswith(("data:", "about:"))
        and f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" != origin
    ]


def _not_blank(png: bytes) -> None:
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("L")
    assert image.width >= 800 and image.height >= 600
    stats = ImageStat.Stat(image)
    assert stats.stddev[0] > 20, f"screenshot looks blank (grey-level stddev {stats.stddev[0]:.1f})"
    assert len(image.getcolors(maxcolors=256 * 256) or range(100)) > 50


def _check_charts(page: Any) -> None:
    charts = page.locator("svg.chart")
    assert charts.count() == 3
    for index in range(3):
        box = charts.nth(index).bounding_box()
        assert box is not None and box["width"] > 250 and box["height"] > 150
        assert charts.nth(index).locator("path").count() > 10


@pytest.fixture(scope="module")
def report_file(eval_home: EvalHome, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "report.html"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragtriage",
            "--home",
            str(eval_home.home),
            "report",
            "base",
            "--compare",
            "variant",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return out


def test_report_file_renders_charts_offline_with_chinese(
    browser: Any, report_file: Path, tmp_path: Path
) -> None:
    page, requests = _open(browser, report_file.as_uri())
    try:
        _check_charts(page)
        assert _foreign(requests, "file://") == []
        assert requests == [report_file.as_uri()]  # the file itself, nothing else
        assert page.locator("script").count() == 0  # the escaped query did not become a script
        assert "<script>alert" in page.locator("#worst .query").first.inner_text()
        assert "出差回来发票多久内要交" in page.locator("#worst").inner_text()
        assert "significant" in page.locator("#significance").inner_text()
        if _cjk_font_installed():
            assert page.evaluate(CJK_GLYPHS_DIFFER), "Chinese text is drawn as missing-glyph boxes"
        _not_blank(page.screenshot(full_page=True))
        if os.environ.get(SCREENSHOT_ENV):  # refresh the README's picture
            height = min(2000, page.evaluate("document.body.scrollHeight"))
            page.screenshot(
                path=str(DOCS_SCREENSHOT),
                full_page=True,
                clip={"x": 0, "y": 0, "width": 1200, "height": height},
            )
    finally:
        page.close()


def test_served_pages_render_and_stay_on_the_server(browser: Any, eval_home: EvalHome) -> None:
    with serve(eval_home.home) as url:
        page, requests = _open(browser, url + "/")
        try:
            assert page.locator("#runs tbody tr").count() >= 2
            page.locator(
                f"a[href='/runs/{eval_home.base_run}/report?compare={eval_home.variant_run}']"
            ).click()
            page.wait_for_load_state("load")
            assert page.url == f"{url}/runs/{eval_home.base_run}/report?compare={eval_home.variant_run}"
            _check_charts(page)
            _not_blank(page.screenshot(full_page=False))
            page.goto(url + "/docs", wait_until="networkidle")
            page.locator(".swagger-ui .opblock").first.wait_for(timeout=90_000)
            assert page.locator(".swagger-ui .opblock").count() >= 10
            assert _foreign(requests, url) == []
        finally:
            page.close()
