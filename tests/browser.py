"""Open an HTML file in headless Chromium as a person would, over the DevTools protocol: what it
logged as errors, what it requested from the network, which charts it drew, and a screenshot.

Used by tests/query/test_report_browser.py; also a developer's screenshot step:

    kidata report -o report.html
    .venv/bin/python tests/browser.py report.html report.png   # then look at report.png

Needs Chromium (Debian: apt-get install chromium) and websocket-client (the test extra).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--remote-debugging-port=0", "--remote-allow-origins=*"]
LOCAL_SCHEMES = ("file:", "data:", "about:", "chrome:", "devtools:")
TIMEOUT = 60.0


def chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageCheck:
    """What the browser saw: errors (console, exceptions, log), requests that left the machine,
    the charts drawn (id -> rendered width x height in CSS pixels), the page height, and per
    chart the pairs of its text labels that overlap as drawn (``overlaps``: id -> the texts of
    each pair and how far they overlap, in px) and its smallest text (``smallest_text``:
    id -> its font size in CSS pixels as drawn, after the page scaled the chart down to fit,
    and the text)."""

    errors: list[str] = field(default_factory=list)
    remote_requests: list[str] = field(default_factory=list)
    charts: dict[str, tuple[float, float]] = field(default_factory=dict)
    height: int = 0
    overlaps: dict[str, list[tuple[str, str, float]]] = field(default_factory=dict)
    smallest_text: dict[str, tuple[float, str]] = field(default_factory=dict)


# Two text labels overlap when their boxes as drawn share any area: the box of the font's line
# (ascent to descent, so a little taller than the ink), rotated with the label, from getBBox()
# and the element's transform to the screen. The lines of one multi-line label are <text>
# elements of one group, whose line boxes meet by design: they count as one label.
_PROBE = """
(() => {
  function corners(t) {
    const b = t.getBBox(), m = t.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
            [b.x, b.y + b.height]].map(([x, y]) => [m.a * x + m.c * y + m.e,
                                                    m.b * x + m.d * y + m.f]);
  }
  function depth(p, q) {  // separating axes of two rectangles: 0 if apart, else how far in
    let least = Infinity;
    for (const quad of [p, q]) {
      for (let i = 0; i < 2; i++) {
        const [x0, y0] = quad[i], [x1, y1] = quad[i + 1];
        let nx = y0 - y1, ny = x1 - x0;
        const len = Math.hypot(nx, ny) || 1; nx /= len; ny /= len;
        const pr = p.map(([x, y]) => x * nx + y * ny), qr = q.map(([x, y]) => x * nx + y * ny);
        least = Math.min(least, Math.min(Math.max(...pr), Math.max(...qr))
                                - Math.max(Math.min(...pr), Math.min(...qr)));
        if (least <= 0) return 0;
      }
    }
    return least;
  }
  return JSON.stringify({
    charts: Array.from(document.querySelectorAll('figure.chart')).map(f => {
      const svg = f.querySelector('svg');
      const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
      const texts = svg ? Array.from(svg.querySelectorAll('text')).filter(
        t => t.textContent.trim() !== '') : [];
      let smallest = [Infinity, ''];
      const quads = texts.map(t => {
        const m = t.getScreenCTM();
        const px = parseFloat(getComputedStyle(t).fontSize) * Math.sqrt(
          Math.abs(m.a * m.d - m.b * m.c));
        if (px < smallest[0]) smallest = [px, t.textContent.trim()];
        return corners(t);
      });
      const overlaps = [];
      for (let i = 0; i < quads.length; i++)
        for (let j = i + 1; j < quads.length; j++) {
          const group = texts[i].parentNode;
          if (group === texts[j].parentNode && group.tagName === 'g') continue;
          const d = depth(quads[i], quads[j]);
          if (d > 0) overlaps.push([texts[i].textContent.trim(), texts[j].textContent.trim(),
                                    Math.round(d * 100) / 100]);
        }
      return [f.id, box.width, box.height, overlaps, texts.length ? smallest : null];
    }),
    height: document.documentElement.scrollHeight
  });
})()
"""


class _DevTools:
    def __init__(self, url: str):
        import websocket

        self.ws = websocket.create_connection(url, timeout=TIMEOUT, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def send(self, method: str, session: str | None = None, **params) -> dict:
        message_id = next(self.ids)
        message = {"id": message_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, deadline: float) -> None:
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"Chromium sent no {method}")
            self.events.append(json.loads(self.ws.recv()))


def check_page(html_file: Path, screenshot: Path | None = None, width: int = 1400) -> PageCheck:
    """Load ``html_file`` in headless Chromium and report what it saw (see :class:`PageCheck`);
    with ``screenshot``, write the whole page there as PNG."""
    executable = chromium()
    if executable is None:
        raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
    # Chromium's helper processes (crashpad) can still write into the profile for a moment after
    # the browser exits; a cleanup that races them must not fail the test.
    with tempfile.TemporaryDirectory(prefix="kidata-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        # Chromium puts its singleton socket in a folder of its own under TMPDIR and leaves it
        # behind when terminated: inside the profile, it goes with it.
        process = subprocess.Popen([executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                    "about:blank"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "TMPDIR": profile})
        try:
            return _drive(process, html_file, screenshot, width)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stderr.close()


def _drive(process: subprocess.Popen, html_file: Path, screenshot: Path | None,
           width: int) -> PageCheck:
    deadline = time.monotonic() + TIMEOUT
    url = None
    for line in process.stderr:
        found = re.search(r"DevTools listening on (ws://\S+)", line)
        if found:
            url = found.group(1)
            break
        if time.monotonic() > deadline:
            break
    if url is None:
        raise RuntimeError("Chromium did not start its DevTools endpoint")
    tools = _DevTools(url)
    try:
        target = tools.send("Target.createTarget", url="about:blank")["targetId"]
        session = tools.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.send(f"{domain}.enable", session)
        tools.send("Emulation.setDeviceMetricsOverride", session, width=width, height=900,
                   deviceScaleFactor=1, mobile=False)
        tools.send("Page.navigate", session, url=html_file.resolve().as_uri())
        tools.wait_for("Page.loadEventFired", deadline)
        probe = tools.send("Runtime.evaluate", session, returnByValue=True, expression=_PROBE)
        if "exceptionDetails" in probe:
            raise RuntimeError(f"the page probe failed: {probe['exceptionDetails']}")
        seen = json.loads(probe["result"]["value"])
        check = PageCheck(charts={c[0]: (c[1], c[2]) for c in seen["charts"]},
                          height=int(seen["height"]),
                          overlaps={c[0]: [tuple(p) for p in c[3]] for c in seen["charts"]
                                    if c[3]},
                          smallest_text={c[0]: tuple(c[4]) for c in seen["charts"] if c[4]})
        if screenshot is not None:
            tools.send("Emulation.setDeviceMetricsOverride", session, width=width,
                       height=min(check.height, 16000), deviceScaleFactor=1, mobile=False)
            shot = tools.send("Page.captureScreenshot", session, format="png")
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        for event in tools.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                               "assert"):
                check.errors.append("console: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                check.errors.append("exception: " + params["exceptionDetails"].get("text", ""))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                check.errors.append("log: " + params["entry"]["text"])
            elif method == "Network.requestWillBeSent":
                request_url = params["request"]["url"]
                if not request_url.startswith(LOCAL_SCHEMES):
                    check.remote_requests.append(request_url)
        return check
    finally:
        tools.ws.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tests/browser.py REPORT.html SCREENSHOT.png", file=sys.stderr)
        return 2
    check = check_page(Path(argv[0]), Path(argv[1]))
    print(f"{len(check.charts)} charts drawn, page {check.height:,} px high; screenshot: "
          f"{argv[1]}")
    for chart, pairs in check.overlaps.items():
        print(f"{chart}: {len(pairs)} overlapping text labels, e.g. {pairs[0]}")
    for chart, (px, text) in check.smallest_text.items():
        if px < 11:
            print(f"{chart}: text drawn at {px:.1f} px ({text!r})")
    for error in check.errors:
        print(f"error: {error}")
    for request in check.remote_requests:
        print(f"network request: {request}")
    return 1 if check.errors or check.remote_requests else 0


if __name__ == "__main__":
    os.environ.setdefault("TMPDIR", tempfile.gettempdir())
    sys.exit(main(sys.argv[1:]))
