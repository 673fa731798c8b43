"""Small helpers the examples share: a text progress bar, PNG output and the exit-status
convention (0: ran and its check passed, 1: its check failed, 2: bad usage).

Only examples import this file; it uses scanlib's public API and, when present, matplotlib.
"""

from __future__ import annotations

import os
import sys
import time

import scanlib as sl

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


class Progress:
    """A one-line progress bar on a terminal; every ~10% a plain line when output is a file."""

    def __init__(self, total: int, width: int = 28, stream=None):
        # sys.stdout read now, not when this module was imported (a test's capture, say)
        stream = sys.stdout if stream is None else stream
        self.total, self.width, self.stream = max(total, 1), width, stream
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self._last_plain = -1
        self._line = ""  # the bar as last drawn on a terminal

    def update(self, done: int, text: str = ""):
        elapsed = time.perf_counter() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else 0.0
        filled = int(self.width * done / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        line = (f"[{bar}] {done:>{len(str(self.total))}}/{self.total}  {text}  "
                f"{rate:5.1f} it/s  eta {eta:4.0f}s")
        if self.tty:
            self._line = line
            self.stream.write("\r" + line)
            self.stream.flush()
        else:
            decile = 10 * done // self.total
            if decile != self._last_plain or done == self.total:
                self._last_plain = decile
                self.stream.write(line + "\n")
                self.stream.flush()

    def note(self, text: str):
        """A line printed above the bar (which is then drawn again below it)."""
        if self.tty:
            self.stream.write("\r\033[K" + text + "\n" + self._line)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self):
        if self.tty and self._line:
            self.stream.write("\n")
            self.stream.flush()


def pyplot():
    """matplotlib.pyplot with a file-only backend, or None (and a one-line note) without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed, so no PNG was written "
              "(pip install matplotlib, or pip install -e '.[demo]').")
        return None
    return plt


def save_figure(fig, name: str, out_dir: str | None = None) -> str:
    out_dir = out_dir or OUT_DIR
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def check(ok: bool, what: str) -> bool:
    print(f"  [{'ok' if ok else 'FAILED'}] {what}")
    return ok


def device_or_exit(name: str) -> str:
    """The device name for --device, or a one-line explanation and exit status 2."""
    if name == "cpu":
        return "cpu"
    try:
        sl.zeros(1, device=name)
    except (RuntimeError, ValueError) as e:  # which part is missing: CuPy, or a usable GPU
        print(f"error: --device {name}: {e} Run with --device cpu instead.", file=sys.stderr)
        raise SystemExit(2) from None
    return name
