"""Where the batch's tasks run: inline, in a local process pool, or on a Dask cluster.

Each executor runs a worker over a list of tasks and hands every result to `done` as it comes;
a task whose worker could not run (a dead process, a lost cluster worker) gets `lost(task, why)`.
The executors know nothing of what a task is.
"""
from __future__ import annotations

import contextlib
import signal
from typing import Any, Callable, Iterator, Sequence

from tracelab.core.errors import ConfigError

Task = Any                                   # picklable; the executors never look inside
Worker = Callable[[Task], dict]              # a task to its result
Lost = Callable[[Task, str], dict]           # the result of a task that could not run, and why
Done = Callable[[Task, dict], None]
Executor = Callable[[list, Done], None]
_IN_FLIGHT_PER_WORKER = 2


def run_inline(worker: Worker) -> Executor:
    def execute(tasks: list, done: Done) -> None:
        for task in tasks:
            done(task, worker(task))
    return execute


def _one_thread() -> None:
    # The pool already uses every core; Arrow's own thread pool would only contend with it.
    import pyarrow
    pyarrow.set_cpu_count(1)
    # Ctrl-C reaches the whole process group: the batch stops its workers itself, and each
    # would print a KeyboardInterrupt traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while a worker process is being started, then take their course
    (sent again once the handlers are back): a start cut short leaves a half-made worker,
    unknown to the pool, that fails loudly once the pool's semaphores are gone. A start that
    fails because the signal reached the forkserver too ends as the signal does."""
    came: list[int] = []
    try:
        previous = {s: signal.signal(s, lambda signum, frame: came.append(signum))
                    for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread, where signals are not handled
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(came):
            signal.raise_signal(sig)  # KeyboardInterrupt, as a rule: it replaces any error


def _start_forkserver() -> None:
    """Started with Ctrl-C ignored: it keeps that while it imports the preload (where a Ctrl-C
    to the process group would kill it with a traceback), and its workers inherit it; the
    batch stops them itself."""
    from multiprocessing import forkserver
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        forkserver.ensure_running()
        return
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def process_pool(jobs: int, worker: Worker, lost: Lost, *,
                 preload: Sequence[str] = ()) -> Executor:
    """A local pool of `jobs` processes running `worker`; workers fork from a server that
    imported `preload` once."""
    def execute(tasks: list, done: Done) -> None:
        import multiprocessing as mp
        from collections import deque
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool
        ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods()
                             else "spawn")
        if ctx.get_start_method() == "forkserver":
            # Workers fork from a server that imported these once: a new worker is cheap.
            ctx.set_forkserver_preload(list(preload))
            _start_forkserver()
        # A dead worker (a crash, the OOM killer) breaks the whole pool. The tasks it held
        # become suspects and run again one at a time in a fresh pool: one that breaks it
        # alone is reported, and the innocent ones get their results.
        queue, suspects = deque(tasks), deque()
        while queue or suspects:
            pool = ProcessPoolExecutor(jobs, mp_context=ctx, max_tasks_per_child=200,
                                       initializer=_one_thread)
            running: dict = {}
            try:
                while queue or suspects or running:
                    with _interrupts_held():  # a submit may start a worker
                        if suspects and not running:
                            task = suspects.popleft()
                            running[pool.submit(worker, task)] = (task, True)
                        while queue and not suspects \
                                and len(running) < jobs * _IN_FLIGHT_PER_WORKER:
                            task = queue.popleft()
                            running[pool.submit(worker, task)] = (task, False)
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    if any(isinstance(f.exception(), BrokenProcessPool) for f in finished):
                        wait(running)
                        for future, (task, alone) in running.items():
                            if not isinstance(future.exception(), BrokenProcessPool):
                                done(task, future.result())
                            elif alone:
                                done(task, lost(task, "the analysis process died (a crash "
                                                      "or out of memory)"))
                            else:
                                suspects.append(task)
                        break
                    for future in finished:
                        task, _ = running.pop(future)
                        done(task, future.result())
            except BaseException:  # interrupted (Ctrl-C, SIGTERM): no worker outlives the batch
                processes = list((getattr(pool, "_processes", None) or {}).values())
                pool.shutdown(wait=False, cancel_futures=True)  # and none is started anew
                for process in processes:
                    with contextlib.suppress(Exception):
                        process.terminate()
                for process in processes:
                    with contextlib.suppress(Exception):
                        process.join(5)
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    return execute


def dask_cluster(address: str, worker: Worker, lost: Lost) -> Executor:
    def execute(tasks: list, done: Done) -> None:
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise ConfigError("--scheduler needs dask.distributed: pip install "
                              "'tracelab[dask]'") from None
        try:
            client = Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"--scheduler {address}: cannot connect ({exc})") from None
        try:
            window = max(2, sum(client.nthreads().values())) * _IN_FLIGHT_PER_WORKER
            pending = iter(tasks)
            futures = as_completed()
            owner = {}
            for task in pending:
                future = client.submit(worker, task, pure=False)
                owner[future.key] = task
                futures.add(future)
                if futures.count() >= window:
                    break
            for future in futures:
                task = owner.pop(future.key)
                try:
                    done(task, future.result())
                except ConfigError:
                    raise
                except Exception as exc:  # a lost worker, KilledWorker, a broken environment
                    done(task, lost(task, f"the analysis failed on the cluster "
                                          f"({type(exc).__name__}: {exc})"))
                future.release()
                nxt = next(pending, None)
                if nxt is not None:
                    new = client.submit(worker, nxt, pure=False)
                    owner[new.key] = nxt
                    futures.add(new)
        finally:
            client.close()
    return execute
