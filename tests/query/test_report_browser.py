"""The report as a person sees it: headless Chromium opens it from disk and must log no error,
request nothing from the network and draw every chart (tests/browser.py drives it).

Outside CI, a machine without Chromium skips these tests; in CI (CI=true) that is a failure,
and .ci/run installs Chromium first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser import check_page, chromium
from conftest import SEEDS

from kidata import Warehouse
from kidata.query.present import write_report

# The slow lane (drives headless Chromium); `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

if chromium() is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI needs Chromium for tests/query/test_report_browser.py "
                           "(apt-get install chromium; .ci/run does it)")
    pytest.skip("Chromium is not installed (apt-get install chromium): the report is not "
                "checked in a browser", allow_module_level=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("browser")
    wh = Warehouse(root / "wh")
    assert wh.load([str(SEEDS)]).ok
    result = write_report(wh, root / "report.html")
    return result.path, result.charts


def test_report_opens_cleanly_with_every_chart(report, tmp_path: Path):
    path, charts = report
    shot = tmp_path / "report.png"
    seen = check_page(path, screenshot=shot)
    assert seen.errors == []
    assert seen.remote_requests == []
    assert list(seen.charts) == charts and len(charts) == 5
    for name, (width, height) in seen.charts.items():
        assert width > 200 and height > 100, f"chart {name} drawn {width}x{height} px"
    # The screenshot covers the whole page (1400 px wide, as high as the page).
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == 1400
    assert int.from_bytes(shot.read_bytes()[20:24], "big") == seen.height > 1500


def test_the_check_fails_on_errors_requests_and_missing_charts(tmp_path: Path):
    # The same check on a page that breaks each rule: it must see every breach.
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
                   '<script>console.error("boom")</script>'
                   '<figure class="chart" id="empty"></figure></body></html>', "utf-8")
    seen = check_page(bad)
    assert "console: boom" in seen.errors
    assert seen.remote_requests == ["http://example.invalid/x.png"]
    assert seen.charts == {"empty": (0, 0)}
