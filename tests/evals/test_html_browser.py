"""leaderboard.html in headless Chromium (Debian's binary, driven through Playwright).

The page must load with no console error and no request to the network, sort its
tables on a click of a header, and render every plot. The screenshot is kept at
``${WMKIT_TEST_ARTIFACTS:-<repo>/test-artifacts}/leaderboard.png``.
"""

import os
import shutil
from pathlib import Path

import pytest
from report_rows import rows, write_records

from wmkit.evals.leaderboard import write_leaderboard

CHROMIUM = os.environ.get("WMKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(
    os.environ.get("WMKIT_TEST_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts"
)

playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    episodes = rows()
    write_records(out, [r for r in episodes if r["agent"] == "window"])
    return write_leaderboard(episodes, out, reps=300)["html"]


def _column(page, table, header):
    """The data-v values of one column of a table, top to bottom."""
    return page.eval_on_selector(
        table,
        """(t, name) => {
            const col = [...t.tHead.rows[0].cells].findIndex(c => c.textContent.trim() === name);
            return [...t.tBodies[0].rows].map(r => r.cells[col].getAttribute("data-v"));
        }""",
        header,
    )


def test_the_page_loads_sorts_and_renders_in_chromium(page_path):
    errors, requests = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")
            assert errors == []
            # Nothing but the page itself and its inline data: URIs is requested.
            assert [u for u in requests if not u.startswith(("data:", page_path.as_uri()))] == []

            table = "#env-table-0"
            before = _column(page, table, "drift")
            page.click(f"{table} thead th:text-is('drift')")
            ascending = _column(page, table, "drift")
            assert ascending != before  # the rows moved
            assert [float(v) for v in ascending] == sorted(float(v) for v in before)
            page.click(f"{table} thead th:text-is('drift')")
            descending = _column(page, table, "drift")
            assert descending == ascending[::-1]
            assert page.get_attribute(f"{table} thead th:text-is('drift')", "aria-sort") == (
                "descending"
            )
            ranking = _column(page, "#ranking", "rank")
            page.click("#ranking thead th:text-is('configuration')")
            assert _column(page, "#ranking", "rank") != ranking

            images = page.eval_on_selector_all(
                "img.plot",
                "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight,"
                " e.getBoundingClientRect().width, e.getBoundingClientRect().height])",
            )
            assert len(images) == 2
            for complete, natural_w, natural_h, width, height in images:
                assert complete and natural_w > 0 and natural_h > 0 and width > 0 and height > 0
            assert errors == []
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = ARTIFACTS / "leaderboard.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
