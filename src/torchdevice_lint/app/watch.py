"""``check --watch``: run again whenever a watched file changes, as ``ruff check --watch`` does.

Polling rather than an OS notification library: no dependency, and the same on every
platform. The files are listed again at every look, so a new file or a changed exclude counts;
on a large tree the looks are spaced so that listing takes at most a third of the time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

#: Seconds between two looks at the files.
POLL_SECONDS = 0.5

Snapshot = Dict[str, Optional[Tuple[int, int]]]


def snapshot(paths: Iterable[str]) -> Snapshot:
    """Each path's modification time and size; None for one that does not exist (yet)."""
    state: Snapshot = {}
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            state[path] = None
        else:
            state[path] = (status.st_mtime_ns, status.st_size)
    return state


def pyprojects_above(paths: Sequence[str]) -> List[str]:
    """Every pyproject.toml that could configure ``paths``: what to watch while the
    configuration is broken, to see it mended."""
    return sorted({str(directory / "pyproject.toml") for path in paths
                   for directory in (Path(os.path.abspath(path)), *Path(os.path.abspath(path)).parents)})


def watch(
    run: Callable[[], int],
    watched: Callable[[], Iterable[str]],
    note: Callable[[str], None],
    poll_seconds: float = POLL_SECONDS,
) -> int:
    """``run()`` now and after every change to the files ``watched()`` names, until Ctrl-C,
    which ends the watch with exit code 0 (ruff's)."""
    try:
        note("Watching for file changes (Ctrl-C stops).")
        while True:
            before = snapshot(watched())  # taken first: a change during the run counts
            run()
            sys.stdout.flush()  # the report, before the wait (stdout may be a pipe)
            while True:
                started = time.monotonic()
                now = snapshot(watched())
                if now != before:
                    break
                time.sleep(max(poll_seconds, 2 * (time.monotonic() - started)))
            note("File change detected; checking again.")
    except KeyboardInterrupt:
        return 0
