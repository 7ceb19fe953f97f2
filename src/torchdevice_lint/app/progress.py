"""A one-line progress display on stderr for long runs, shown only on a terminal: a pipe, a
file or CI logs get nothing, so machine-read output and logs stay clean."""

from __future__ import annotations

import os
import shutil
import time
from typing import Optional, TextIO

#: Runs shorter than this never show the line (no flicker on small projects or editor saves).
SHOW_AFTER_SECONDS = 0.5
REDRAW_EVERY_SECONDS = 0.1


class Progress:
    def __init__(self, total: int, stream: TextIO, verb: str = "Checking", clock=time.monotonic) -> None:
        self.total = total
        self.stream = stream
        self.verb = verb
        self.clock = clock
        self.done = 0
        self.started = clock()
        self.last_drawn: Optional[float] = None
        self.enabled = total > 1 and _is_terminal(stream)

    def advance(self, path: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = self.clock()
        if now - self.started < SHOW_AFTER_SECONDS:
            return
        if self.last_drawn is not None and now - self.last_drawn < REDRAW_EVERY_SECONDS and self.done < self.total:
            return
        self.last_drawn = now
        columns = shutil.get_terminal_size((80, 24)).columns
        counter = f"{self.verb} [{str(self.done).rjust(len(str(self.total)))}/{self.total}] "
        room = max(0, columns - len(counter) - 1)
        shown = path if len(path) <= room else "..." + path[-max(0, room - 3):]
        self.stream.write(f"\r\x1b[K{counter}{shown}")
        self.stream.flush()

    def close(self) -> None:
        """Erase the line, so what is printed next starts at the left margin."""
        if self.enabled and self.last_drawn is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
