"""Running one check on several threads at once (the Cython loops release the GIL)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_at_once(work: Callable[[int], None], threads: int = 4) -> None:
    """Run ``work(k)`` for k in range(threads), each on its own thread, all at once;
    raise the first failure (an assertion included) in the calling thread."""
    failures: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:   # reported by the calling thread
            failures.append(exc)

    started = [threading.Thread(target=guarded, args=(k,)) for k in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    if failures:
        raise failures[0]
