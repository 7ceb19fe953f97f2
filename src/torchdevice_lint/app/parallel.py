"""Checking and fixing many files: cached results first, then the rest on every core.

Each file is independent (no full-repository pass), so the files a cache does not answer are
spread over a process pool, largest first so no worker is left with a big file at the end.
Few files are checked in this process: starting workers costs more than it saves there, and a
single file or stdin never needs them. Results come back in the order of ``paths``.

A worker that dies (a crash in native code, the OOM killer) costs only the file it was checking:
workers mark each file they start in shared memory, so when the pool breaks, the files started
and not answered are checked again one at a time, each in a pool of its own; the one that kills
its pool again gets a one-line error, and the files no worker had started go to a new pool.

``per-file-timeout`` (CPU seconds) is enforced by a timer that interrupts Python code, which
cannot stop LibCST's native parser. A checking worker also arms a second CPU timer at twice the budget
whose signal ends the process even inside native code; its file, started longer ago than the
budget when the pool broke, gets the over-budget error without being checked again.

A worker whose parent is killed (SIGKILL, the OOM killer) ends itself: forked workers hold both
ends of the pool's pipes, so their reads never see EOF and their writes never fail. A thread in
each worker notices the new parent and sends the worker SIGTERM, which a file write holds back
until the file is complete (``sources.write_source``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..engine.engine import Engine
from ..model.errors import FileError, OverBudget, file_error
from ..model.findings import FileResult
from ..model.fixes import Applicability
from .cache import ResultCache, content_hash
from .runner import FixResult, check_file, fix_file
from .sources import SourceError, SourceFile, read_source

T = TypeVar("T")

#: Below this many files per worker the pool is not started.
MIN_FILES_PER_WORKER = 4
#: Files handed to a worker at a time: enough to keep the pipe quiet, few enough to balance.
MAX_BATCH = 8
WORKER_DIED = "internal error (the process checking this file died); please report this as a bug"
#: How often a worker looks whether the process that started it is still its parent (seconds).
PARENT_POLL_SECONDS = 0.25

_worker_engine: Optional[Engine] = None
#: Shared with the parent: at a file's index, when a worker started checking it (monotonic clock).
_worker_started = None


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


def _start_worker(engine: Engine, started, parent: Optional[int]) -> None:
    """``parent``: the process that started the pool, when the worker was forked from it; a
    worker of the forkserver watches the server, which ends with that process."""
    global _worker_engine, _worker_started
    _worker_engine, _worker_started = engine, started
    _exit_with_parent(parent or os.getppid())


def _exit_with_parent(parent: int) -> None:
    """End this worker soon after ``parent`` dies, but never while it writes a file.

    Nothing else ends it: each forked worker holds the write end of the pipe it reads batches
    from and the read end of the pipe it answers on, so once the parent is gone a read never
    sees EOF and a write to a full pipe never fails. A thread polls the parent's pid, then sends
    this process SIGTERM: the default action ends it at once, and ``sources.write_source`` holds
    the signal back until the file in hand is complete (it is repeated in case one lands while a
    write restores its handlers). PR_SET_PDEATHSIG would be Linux-only and tied to the forking
    thread; closing the inherited pipe ends would rely on the pool's internals and wait for the
    batch to end."""
    if os.name != "posix":  # elsewhere os.kill terminates at once, even mid-write
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the host program

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        while True:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(PARENT_POLL_SECONDS)

    threading.Thread(target=watch, name="torchdevice-exit-with-parent", daemon=True).start()


def _check_batch(batch: Sequence[Tuple[int, str, Optional[SourceFile]]], with_edits: bool) -> List[Tuple[int, FileResult]]:
    results = []
    budget = _worker_engine.settings.per_file_timeout
    hard_limit = budget and hasattr(signal, "setitimer")
    for index, path, source in batch:
        _worker_started[index] = time.monotonic()
        if hard_limit:  # SIGPROF's default action ends the process, even inside native code
            signal.signal(signal.SIGPROF, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_PROF, 2 * budget)
        try:
            results.append((index, check_file(_worker_engine, path, with_edits, source=source)))
        finally:
            if hard_limit:
                signal.setitimer(signal.ITIMER_PROF, 0)
    return results


def _pool_context():
    """fork where it exists and this process runs one thread: workers inherit the loaded rules
    instead of importing them again. A fork copies only the calling thread, so a child of a
    process with other threads (a language server's, torch's own) can deadlock on a lock one of
    them held, and Python 3.12+ warns; there the forkserver, which imports the rules once for
    all its workers, else spawn."""
    import multiprocessing  # with the pool only: a run over a few files never starts one

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and _thread_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torchdevice_lint.engine.batched", "torchdevice_lint.engine.fixer"])
        return context
    return multiprocessing.get_context("spawn")


def _thread_count() -> int:
    """The threads of this process, native ones included (what Python's fork warning counts)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not on Linux
        return threading.active_count()


def _answer_from_cache(
    engine: Engine,
    paths: Sequence[str],
    cache: Optional[ResultCache],
    answer: Callable[[str, SourceFile, FileResult], Optional[T]],
    on_done: Callable[[str], None],
) -> Tuple[List[Optional[T]], List[Tuple[int, str, Optional[SourceFile]]], Dict[int, str]]:
    """Read every file; where the cache holds a result for its content and ``answer`` turns
    that into the file's result, it is done. Returns the results so far, the files still to
    run (index, path, source) and the content digests by index, for filling the cache."""
    results: List[Optional[T]] = [None] * len(paths)
    pending: List[Tuple[int, str, Optional[SourceFile]]] = []
    digests: Dict[int, str] = {}
    for index, path in enumerate(paths):
        source = _read(path)
        if cache is not None and source is not None:
            digest = digests[index] = content_hash(source.raw) + engine.project_key(path)
            cached = cache.get(path, digest)
            answered = answer(path, source, cached) if cached is not None else None
            if answered is not None:
                results[index] = answered
                on_done(path)
                continue
        pending.append((index, path, source))
    return results, pending, digests


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
    results, pending, digests = _answer_from_cache(engine, paths, cache, lambda path, source, cached: cached, on_done)

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
            error = results[index].error
            if source is not None and not (error and error.transient):  # the result follows from bytes and build
                cache.put(path, digests[index], results[index])
        cache.save()
    return results


def _check_in_pool(engine: Engine, pending, with_edits: bool, workers: int):
    from ..engine import batched  # noqa: F401 - LibCST, imported once here, not in every forked worker

    return _run_in_pool(engine, pending, workers, _check_batch, (with_edits,), _start_worker,
                        lambda path, error: FileResult(path, error=error))


def _run_in_pool(engine: Engine, pending, workers: int, task, args, initializer, failed, stop: Callable[[], bool] = lambda: False):
    """``(index, result)`` for every pending file, whatever happens to the workers: ``task``
    (``_check_batch`` or ``_fix_batch``) on batches; ``failed(path, error)`` is the result of a
    file whose worker died. ``stop()`` turning true ends the run after the batches in hand."""
    if engine.projects is not None:
        for _, path, _ in pending:  # the project model, read once here for every worker
            engine.projects.read(path)
    context = _pool_context()
    started = context.RawArray("d", max(index for index, _, _ in pending) + 1)
    budget = engine.settings.per_file_timeout
    remaining = list(pending)
    while remaining:
        answered = set()
        for index, result in _pool_round(engine, context, remaining, workers, started, task, args, initializer, stop):
            answered.add(index)
            yield index, result
        if stop():
            return
        ended = time.monotonic()
        left = [item for item in remaining if item[0] not in answered]
        suspects = [item for item in left if started[item[0]]]
        if left and not suspects:  # the pool broke before any file was started
            for index, path, _ in left:
                yield index, failed(path, FileError(path, "internal error (the worker processes could not start); please report this as a bug"))
            return
        for item in suspects:  # alone in a pool: a crash now is this file's own
            if budget and ended - started[item[0]] >= budget:
                yield item[0], failed(item[1], file_error(item[1], OverBudget(budget)))
                continue
            alone = list(_pool_round(engine, context, [item], 1, started, task, args, initializer, stop))
            yield from alone or [(item[0], failed(item[1], FileError(item[1], WORKER_DIED)))]
        remaining = [item for item in left if not started[item[0]]]


def _pool_round(engine: Engine, context, items, workers: int, started, task, args, initializer, stop: Callable[[], bool]):
    """The results a pool gives for ``items`` before it ends, breaks or is stopped."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    largest_first = sorted(items, key=lambda item: -len(item[2].text) if item[2] else 0)
    batch_size = max(1, min(MAX_BATCH, len(items) // (workers * 8)))
    batches = [largest_first[start:start + batch_size] for start in range(0, len(largest_first), batch_size)]
    forked = context.get_start_method() == "fork"
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=initializer,
                               initargs=(engine, started, os.getpid() if forked else None))
    try:
        futures = [pool.submit(task, batch, *args) for batch in batches]
        for future in futures:
            if stop():
                for later in futures:
                    later.cancel()  # batches not started; the running ones finish their files
            if future.cancelled():
                continue
            try:
                batch_results = future.result()
            except BrokenProcessPool:
                continue  # other batches may have finished before the break
            yield from batch_results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# -- fixing -------------------------------------------------------------------------------------
def _ignore_interrupts() -> None:
    """Workers leave SIGINT to the main process, which stops handing out files."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_fix_worker(engine: Engine, started, parent: Optional[int]) -> None:
    _ignore_interrupts()
    _start_worker(engine, started, parent)


def _fix_batch(batch: Sequence[Tuple[int, str, Optional[SourceFile]]], unsafe: bool, write: bool) -> List[Tuple[int, FixResult]]:
    results = []
    for index, path, source in batch:
        _worker_started[index] = time.monotonic()
        results.append((index, fix_file(_worker_engine, path, unsafe, write, source=source)))
    return results


def _nothing_to_fix(cached: FileResult, unsafe: bool) -> bool:
    """No finding with a fix to apply, or an error the same bytes would give the fixer too."""
    limit = (Applicability.UNSAFE if unsafe else Applicability.SAFE).rank
    return not any(f.fix and f.fix.applicability.rank <= limit for f in cached.findings)


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

    def unchanged(path: str, source: SourceFile, cached: FileResult) -> Optional[FixResult]:
        if not _nothing_to_fix(cached, unsafe):
            return None
        return FixResult(path, source.text, source.text, remaining=None if cached.error else cached,
                         error=cached.error, source=source)

    results, pending, digests = _answer_from_cache(engine, paths, cache, unchanged, on_done)

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
    from ..engine import fixer  # noqa: F401 - LibCST, imported once here, not in every forked worker

    return _run_in_pool(engine, pending, workers, _fix_batch, (unsafe, write), _start_fix_worker,
                        lambda path, error: FixResult(path, error=error), stop)
