"""Progress text for a plain terminal: ``compiling selu… 1.2 s`` on stderr, erased when done.

Only a terminal gets it: in a notebook the kernel's stderr is not a TTY (and the magics show
progress there by updating their display instead), so nothing of this reaches the outputs a
notebook saves or nbval compares. The line is redrawn in place with a carriage return from a
daemon thread, so a compile that blocks the main thread still shows its clock running.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

# Quick steps draw nothing (no flicker); the line appears once a step has taken this long.
DELAY_S = 0.5
INTERVAL_S = 0.1


def stderr_is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: the current ``sys.stderr``) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class TerminalProgress:
    """A context manager showing ``label… N.N s`` on a terminal's stderr while it is open.

    ``update(label)`` changes the text (the clock keeps running); on exit the line is
    erased. On anything but a terminal it does nothing at all."""

    def __init__(self, label: str, stream: TextIO | None = None, delay: float | None = None,
                 interval: float = INTERVAL_S):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = stderr_is_terminal(self.stream)
        self.label = label
        self.delay = DELAY_S if delay is None else delay
        self.interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0  # characters on the line now, to erase
        self._start = 0.0

    def _draw(self) -> None:
        with self._lock:
            text = f"{self.label}… {time.perf_counter() - self._start:.1f} s"
            pad = " " * max(self._width - len(text), 0)
            self.stream.write("\r" + text + pad)
            self.stream.flush()
            self._width = len(text)

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            self._draw()
            self._stop.wait(self.interval)

    def update(self, label: str) -> None:
        self.label = label
        if self.enabled and self._width:
            self._draw()

    def __enter__(self) -> TerminalProgress:
        if self.enabled:
            self._start = time.perf_counter()
            if self.delay <= 0:
                self._draw()
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="jaxkit-progress")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
                self._width = 0
