"""Checking and fixing many files: cached results first, then the rest on every core.

Each file is independent (no full-repository pass), so the files a cache does not answer are
spread over a process pool, largest first so no worker is left with a big file at the end.
Few files are checked in this process: starting workers costs more than it saves there, and a
single file or stdin never needs them. Results come back in the order of ``paths``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, List, Optional, Sequence, Tuple

from ..analysis.engine import Engine
from ..analysis.findings import FileResult
from .cache import ResultCache, content_hash
from .runner import FixResult, check_file, fix_file
from .sources import SourceError, SourceFile, read_source

#: Below this many files per worker the pool is not started.
MIN_FILES_PER_WORKER = 4
#: Files handed to a worker at a time: enough to keep the pipe quiet, few enough to balance.
MAX_BATCH = 8

_worker_engine: Optional[Engine] = None


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _read(path: str) -> Optional[SourceFile]:
    """The decoded file, or None when it cannot be read: ``check_file`` then reports why."""
    try:
        return read_source(path)
    except SourceError:
        return None


def _start_worker(engine: Engine) -> None:
    global _worker_engine
    _worker_engine = engine


def _check_batch(batch: Sequence[Tuple[int, str, Optional[SourceFile]]], with_edits: bool) -> List[Tuple[int, FileResult]]:
    return [(index, check_file(_worker_engine, path, with_edits, source=source)) for index, path, source in batch]


def _pool_context():
    """fork where it exists: workers inherit the loaded rules instead of importing them again."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def check_paths(
    engine: Engine,
    paths: Sequence[str],
    with_edits: bool = False,
    jobs: int = 0,
    cache: Optional[ResultCache] = None,
    on_done: Callable[[str], None] = lambda path: None,
) -> List[FileResult]:
    """Check ``paths`` with up to ``jobs`` processes (0: one per core), using and filling
    ``cache``; ``on_done(path)`` follows each file (the progress display)."""
    jobs = jobs or available_cores()
    results: List[Optional[FileResult]] = [None] * len(paths)
    pending: List[Tuple[int, str, Optional[SourceFile]]] = []
    digests = {}
    for index, path in enumerate(paths):
        source = _read(path)
        if cache is not None and source is not None:
            digest = digests[index] = content_hash(source.raw)
            cached = cache.get(path, digest)
            if cached is not None:
                results[index] = cached
                on_done(path)
                continue
        pending.append((index, path, source))

    workers = min(jobs, len(pending) // MIN_FILES_PER_WORKER)
    if workers > 1:
        for index, result in _check_in_pool(engine, pending, with_edits, workers):
            results[index] = result
            on_done(result.filename)
    else:
        for index, path, source in pending:
            results[index] = check_file(engine, path, with_edits, source=source)
            on_done(path)

    if cache is not None:
        for index, path, source in pending:
            if source is not None:  # the result, even an error, follows from bytes and build
                cache.put(path, digests[index], results[index])
        cache.save()
    return results


def _check_in_pool(engine: Engine, pending, with_edits: bool, workers: int):
    largest_first = sorted(pending, key=lambda item: -len(item[2].text) if item[2] else 0)
    batch_size = max(1, min(MAX_BATCH, len(pending) // (workers * 8)))
    batches = [largest_first[start:start + batch_size] for start in range(0, len(largest_first), batch_size)]
    with ProcessPoolExecutor(workers, mp_context=_pool_context(), initializer=_start_worker, initargs=(engine,)) as pool:
        futures = [pool.submit(_check_batch, batch, with_edits) for batch in batches]
        for future in futures:
            yield from future.result()


# -- fixing -------------------------------------------------------------------------------------
def _ignore_interrupts() -> None:
    """Workers leave SIGINT to the main process, which stops handing out files."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_fix_worker(engine: Engine) -> None:
    _ignore_interrupts()
    _start_worker(engine)


def _fix_batch(batch: Sequence[Tuple[int, str, Optional[SourceFile]]], unsafe: bool, write: bool) -> List[Tuple[int, FixResult]]:
    return [(index, fix_file(_worker_engine, path, unsafe, write, source=source)) for index, path, source in batch]


def _nothing_to_fix(cached: FileResult, unsafe: bool) -> bool:
    """No finding with a fix to apply, or an error the same bytes would give the fixer too."""
    applicable = ("safe", "unsafe") if unsafe else ("safe",)
    return not any(f.fix and f.fix.applicability in applicable for f in cached.findings)


def fix_paths(
    engine: Engine,
    paths: Sequence[str],
    unsafe: bool,
    write: bool,
    jobs: int = 0,
    cache: Optional[ResultCache] = None,
    stop: Callable[[], bool] = lambda: False,
    on_done: Callable[[str], None] = lambda path: None,
) -> List[FixResult]:
    """``check_paths`` for the fixer: a file whose cached result has nothing to fix is not
    parsed; the rest are fixed (and written) on every core. ``stop()`` turning true (SIGINT)
    ends the run after the files in hand; the results of the files fixed are returned."""
    jobs = jobs or available_cores()
    results: List[Optional[FixResult]] = [None] * len(paths)
    pending: List[Tuple[int, str, Optional[SourceFile]]] = []
    digests = {}
    for index, path in enumerate(paths):
        source = _read(path)
        if cache is not None and source is not None:
            digest = digests[index] = content_hash(source.raw)
            cached = cache.get(path, digest)
            if cached is not None and _nothing_to_fix(cached, unsafe):
                results[index] = FixResult(path, source.text, source.text, remaining=None if cached.error else cached,
                                           error=cached.error, source=source)
                on_done(path)
                continue
        pending.append((index, path, source))

    workers = min(jobs, len(pending) // MIN_FILES_PER_WORKER)
    if workers > 1:
        for index, result in _fix_in_pool(engine, pending, unsafe, write, workers, stop):
            results[index] = result
            on_done(result.path)
    else:
        for index, path, source in pending:
            if stop():
                break
            results[index] = fix_file(engine, path, unsafe, write, source=source)
            on_done(path)

    if cache is not None:
        for index, path, source in pending:
            result = results[index]
            # An unchanged file's remaining findings are its check result; a changed one is checked next time.
            if source is not None and result is not None and result.error is None and not result.changed:
                cache.put(path, digests[index], result.remaining)
        cache.save()
    return [result for result in results if result is not None]


def _fix_in_pool(engine: Engine, pending, unsafe: bool, write: bool, workers: int, stop: Callable[[], bool]):
    largest_first = sorted(pending, key=lambda item: -len(item[2].text) if item[2] else 0)
    batch_size = max(1, min(MAX_BATCH, len(pending) // (workers * 8)))
    batches = [largest_first[start:start + batch_size] for start in range(0, len(largest_first), batch_size)]
    pool = ProcessPoolExecutor(workers, mp_context=_pool_context(), initializer=_start_fix_worker, initargs=(engine,))
    try:
        futures = [pool.submit(_fix_batch, batch, unsafe, write) for batch in batches]
        for future in futures:
            if stop():
                for later in futures:
                    later.cancel()  # batches not started; the running ones finish their files
            if future.cancelled():
                continue
            yield from future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
