"""A page as a person sees it: Debian's chromium, headless, at 1280 px, one run per page
for a screenshot, the DOM after load and what the page wrote to the console.

The reports allow no script (their Content-Security-Policy), so the width is measured on
a probe copy: the same page, with script-src opened for one inline script that writes
the document's scroll width on <body>. chromium logs every console message (log, warn,
error, an uncaught exception, a refused fetch) as an INFO "CONSOLE" line on stderr, the
level not told apart: a static report writes none, so any is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.image import imread

WIDTH, HEIGHT = 1280, 2000
_CSP = "default-src 'none'"
_PROBE = (
    "<script>document.body.dataset.scrollWidth=document.documentElement.scrollWidth;"
    "document.body.dataset.viewportWidth=window.innerWidth</script>"
)
_SCROLL_WIDTH = re.compile(r'data-scroll-width="(\d+)"')
_VIEWPORT_WIDTH = re.compile(r'data-viewport-width="(\d+)"')


def chromium() -> str | None:
    return shutil.which("chromium")


@dataclass(frozen=True)
class Rendered:
    screenshot: Path
    dom: str
    console: list[str]  # chromium's CONSOLE lines
    scroll_width: int  # the document's, -1 when the probe did not run
    viewport_width: int
    seconds: float  # chromium's wall time: start, load, layout, screenshot

    def ink(self) -> float:
        """Share of the screenshot's pixels that are not white."""
        rgb = imread(self.screenshot)[..., :3]
        return float(np.mean(np.any(rgb < 0.98, axis=-1)))


def probe_copy(page: Path, dest: Path) -> Path:
    """page with the width probe (and the CSP opened for it alone)."""
    text = page.read_text()
    if _CSP in text:
        text = text.replace(_CSP, f"{_CSP}; script-src 'unsafe-inline'", 1)
    at = text.rfind("</body>")
    text = text[:at] + _PROBE + text[at:] if at >= 0 else text + _PROBE
    dest.write_text(text)
    return dest


def render(page: Path, work: Path, binary: str) -> Rendered:
    """Screenshot (work/<page>.png), DOM and console of page; chromium's profile and home
    stay under work (none of it is written to the user's home)."""
    work.mkdir(parents=True, exist_ok=True)
    probe = probe_copy(page, work / f"{page.stem}.probe.html")
    shot = work / f"{page.stem}.png"
    home = work / "chromium-home"
    home.mkdir(exist_ok=True)
    cmd = [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
           f"--window-size={WIDTH},{HEIGHT}", "--hide-scrollbars",
           f"--user-data-dir={home / 'profile'}", "--enable-logging=stderr", "--v=0",
           f"--screenshot={shot}", "--dump-dom", probe.as_uri()]  # fmt: skip
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_CACHE_HOME": str(home / "cache")}  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
    seconds = time.monotonic() - started
    if done.returncode != 0 or not shot.exists():
        raise RuntimeError(f"chromium exit {done.returncode}: {done.stderr[-2000:]}")
    console = [ln for ln in done.stderr.splitlines() if ":CONSOLE" in ln]
    scroll, viewport = (_int(p.search(done.stdout)) for p in (_SCROLL_WIDTH, _VIEWPORT_WIDTH))
    return Rendered(shot, done.stdout, console, scroll, viewport, seconds)


def _int(m: re.Match[str] | None) -> int:
    return int(m[1]) if m else -1
