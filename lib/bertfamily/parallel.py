"""Independent jobs run side by side in worker processes that are fresh interpreters, never forks of the
caller (lesson 1's runs, lesson 6's models): :func:`in_processes`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tqdm.auto import tqdm

#: How :func:`in_processes` starts its workers (lesson 1's runs, lesson 6's models). Not ``"fork"``: a
#: forked child inherits the parent's memory as it is, and state the parent has initialised may be
#: unusable there. A lesson's first cell asks ``torch.cuda.is_available()``, which initialises the CUDA
#: driver where a GPU is visible; in a forked worker the first CUDA call (AdamW's ``step`` asks whether a
#: CUDA graph is being captured, even for CPU tensors) then raises "CUDA error: initialization error"
#: (issue 31, seen on torch 2.11 with a GPU). The fork server is a fresh interpreter, and each worker is
#: forked from it. As with any such start method, a script that calls :func:`in_processes` must do so
#: under ``if __name__ == "__main__":`` (a notebook need not).
START_METHOD = "forkserver"


def _worker_context(preload: str | None = None):
    """The multiprocessing context of :data:`START_METHOD`, or None where it is missing (Windows).

    ``preload``: a module the fork server imports once, when this process first starts it (the module of
    the function the workers run: torch and transformers come with it), so that two workers forked from
    it import nothing again (2.5-3 s of CPU a worker). A server already running keeps what it has."""
    import multiprocessing

    if START_METHOD not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context(START_METHOD)
    if preload and preload != "__main__":  # a script's own functions: its workers import it as __mp_main__
        context.set_forkserver_preload([preload])
    return context


def in_processes(
    function: Callable, jobs: Sequence, processes: int | None = None, progress: bool = True, desc: str = "runs"
) -> list:
    """``[function(job) for job in jobs]``, run ``processes`` at a time (default: one per CPU, at most
    one per job) in worker processes that are fresh interpreters (:data:`START_METHOD`), never forks
    of this one: they inherit its environment variables (the pinned kernels) but nothing it has set
    up, such as CUDA. The same results as the loop, which runs here instead where that start method
    is missing (Windows) or with ``processes=1``. ``function`` must be importable (defined in a
    module)."""
    import os

    jobs = list(jobs)
    if processes is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        processes = max(1, min(len(jobs), cores))
    if not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    context = _worker_context(getattr(function, "__module__", None))
    bar = tqdm(total=len(jobs), desc=desc, disable=not progress)
    results = []
    if processes > 1 and context is not None:
        from concurrent.futures import ProcessPoolExecutor

        from .env import quiet_import_noise

        with ProcessPoolExecutor(processes, mp_context=context, initializer=quiet_import_noise) as pool:
            for result in pool.map(function, jobs):
                results.append(result)
                bar.update()
    else:
        for job in jobs:
            results.append(function(job))
            bar.update()
    bar.close()
    return results
