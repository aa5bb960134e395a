"""A one-line progress bar (bytes done, rate, ETA) for terminals; silent when the output is not a terminal."""
import sys
import time


def _size(n):
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def _clock(seconds):
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """progress = Progress(total_bytes, "repack"); progress.advance(n, "/path"); progress.close().

    enabled=None (default) draws only when `stream` (stderr) is a terminal, so logs and pipes stay clean."""

    def __init__(self, total, label="", stream=None, enabled=None, width=24, interval=0.1):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.total = max(int(total), 0)
        self.label = label
        self.done = 0
        self.width = width
        self.interval = interval
        self.start = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self.item = ""

    def advance(self, nbytes, item=None):
        self.done += int(nbytes)
        if item is not None:
            self.item = item
        self._maybe_draw()

    def set_item(self, item):
        self.item = item
        self._maybe_draw()

    def _maybe_draw(self, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        elapsed = max(now - self.start, 1e-9)
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = int(round(frac * self.width))
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 and self.total > self.done else 0.0
        item = self.item if len(self.item) <= 40 else "..." + self.item[-37:]
        line = (f"{self.label} {frac * 100:3.0f}% [{'#' * filled}{'.' * (self.width - filled)}] "
                f"{_size(self.done)}/{_size(self.total)} {_size(rate)}/s ETA {_clock(eta)} {item}")
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self):
        if self.enabled:
            self._maybe_draw(force=True)
            if self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
