"""CPU seconds of a call, measured so that ratios between two sizes stay true on a busy machine
late in a long test session."""

import gc
import time


def least_cpu_seconds(call, repeats: int = 2) -> float:
    """The least CPU time of `repeats` runs of `call`.

    The session's objects are frozen first: a full collection rescans every object the earlier
    tests left alive, a cost that grows with the session and not with the input measured."""
    gc.collect()
    gc.freeze()
    try:
        best = float("inf")
        for _ in range(repeats):
            started = time.process_time()
            call()
            best = min(best, time.process_time() - started)
        return best
    finally:
        gc.unfreeze()
