"""Compiles numba kernels in another process, so that a first call does not wait for numba
(compiler="auto"): the caller runs NumPy's code meanwhile, and loads the kernel from numba's
disk cache once it is there. numba's compiler is Python holding the GIL; a thread would halve
the speed of the NumPy code it runs beside, a process takes another core.

Up to PROCESSES processes per Python process (`python -m scanlib.scan.loop.native_worker`,
at a slightly lower priority), each started when a job finds the others busy, each compiling
its jobs one at a time in the order they came: a program's kernels compile side by side
where there are cores for them. Each exits at the end of its stdin (when this process exits),
after the jobs it was sent: those still fill the disk cache for the next run. A job is (the
kernel module's path, numba's signature, the graph's types of its values); its answer, None
or why it failed, is read by a thread here. A forked child starts processes of its own.

Imports only the standard library and the logger (logs.py); the worker imports native.py.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import threading
import time

from ... import logs

__all__ = ["submit", "wait_idle", "full", "Job", "read_message", "write_message"]

log = logs.get("numba")
# Kernels waiting in the background process at most: more are asked for again once it has
# room (a body closing over a Python float is a kernel per value: a sweep over 150 values
# queued 150 compiles, 35 s of them after the caller had exited).
MAX_QUEUED = 8
# Kernels one process compiles before it is replaced (numba keeps every module it compiled:
# about 1.6 MB each).
RECYCLE_AFTER = 100


def _processes():
    """How many compile processes at most: SCANLIB_COMPILE_PROCESSES (taken as given), else
    half the cores this process may run on (the other half for the caller's NumPy code), 1
    to 4. Each holds numba's compiler, about 200 MB; all but the first exit when idle."""
    named = os.environ.get("SCANLIB_COMPILE_PROCESSES", "").strip()
    if named:
        try:
            n = int(named)
        except ValueError:
            n = 0
        if n >= 1:
            return n
        log.warning("SCANLIB_COMPILE_PROCESSES=%r is not a whole number of processes, at "
                    "least 1; using 1", named)
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(1, min(4, cores // 2))


PROCESSES = _processes()
_HEADER = struct.Struct("<Q")  # a message: its length, then its pickle


def write_message(stream, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_message(stream):
    """The next message, or None at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


class Job:
    """A kernel compiling in the worker: done() once it has answered; `error` is then None
    (compiled, checked and recorded: it loads from the disk cache) or why not."""

    def __init__(self, what):
        self.what, self.error, self.seconds = what, None, None
        self._done = threading.Event()
        self.submitted, self.pid = time.perf_counter(), os.getpid()

    def done(self):
        if self.pid != os.getpid() and not self._done.is_set():  # a fork's copy: no answer
            self.error = "it was compiling in the parent process when this one was forked"
            return True
        return self._done.is_set()

    def finish(self, error, seconds):
        self.error, self.seconds = error, seconds
        self._done.set()
        waited = time.perf_counter() - self.submitted
        if error is None:
            log.info("compiled %s in the background in %.1f s (%.1f s after it was asked "
                     "for); calls from now on run it", self.what, seconds, waited)
        else:
            log.info("%s does not compile in the background (%s); NumPy's code runs it",
                     self.what, error)


class _Worker:
    def __init__(self, exit_when_idle=False):
        self.lock = threading.Lock()
        self.process, self.jobs, self.next_id, self.sent = None, {}, 0, 0
        # A pool's extra process exits once it has answered every job (numba's compiler
        # holds about 200 MB); the next job it gets starts a new one.
        self.exit_when_idle = exit_when_idle

    def submit(self, path, types, expected, name, what):
        job = Job(what)
        with self.lock:
            if self.process is not None and self.sent >= RECYCLE_AFTER:
                self._retire()
            if self.process is None or self.process.poll() is not None:
                self._start()
            if self.process is None:
                job.finish("the background compile process does not start", 0.0)
                return job
            self.next_id += 1
            self.sent += 1
            self.jobs[self.next_id] = (job, self.process)
            try:
                write_message(self.process.stdin, (self.next_id, path, types, expected, name,
                                                   what))
            except (OSError, ValueError):  # it exited: the reader thread answers its jobs
                pass
        log.info("compiling %s in a background process; NumPy's code runs it meanwhile", what)
        return job

    def _retire(self):
        """Close the process's stdin: it answers the jobs it has and exits (its reader thread
        reads them); the next job starts a new one."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        self.process = None

    def _start(self):
        self.sent = 0
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))  # where `import scanlib` finds this copy
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "scanlib.scan.loop.native_worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env, close_fds=True)
        except OSError as e:
            log.info("the background compile process does not start: %s", e)
            self.process = None
            return
        threading.Thread(target=self._read, args=(self.process,), daemon=True,
                         name="scanlib-numba-worker").start()

    def _read(self, process):
        while True:
            try:
                message = read_message(process.stdout)
            except (OSError, ValueError, pickle.UnpicklingError, EOFError):
                message = None
            if message is None:
                break
            job_id, error, seconds = message
            with self.lock:
                job, _ = self.jobs.pop(job_id, (None, None))
                if self.exit_when_idle and not self.jobs and self.process is process:
                    self._retire()
            if job is not None:
                job.finish(error, seconds)
        code = process.wait()
        with self.lock:  # the jobs it had not answered
            orphans = [i for i, (_, p) in self.jobs.items() if p is process]
            orphans = [self.jobs.pop(i)[0] for i in orphans]
        for job in orphans:
            job.finish(f"the background compile process exited (status {code})", 0.0)


class _Pool:
    """Up to PROCESSES workers: a job goes to an idle one, to a new one while there are fewer
    than PROCESSES, else to the one with the fewest jobs waiting."""

    def __init__(self):
        self.lock = threading.Lock()
        self.workers = []

    @property
    def jobs(self):
        """Every worker's unanswered jobs."""
        return [j for w in list(self.workers) for j in list(w.jobs.values())]

    def submit(self, path, types, expected, name, what):
        with self.lock:
            idle = [w for w in self.workers if not w.jobs]
            if idle:
                worker = idle[0]
            elif len(self.workers) < PROCESSES:
                worker = _Worker(exit_when_idle=bool(self.workers))
                self.workers.append(worker)
            else:
                worker = min(self.workers, key=lambda w: len(w.jobs))
        return worker.submit(path, types, expected, name, what)


_WORKER = _Pool()


_FORKED_FROM = []  # in a forked child: the parent's worker object, its pipes closed here


def _forget_in_child():
    """A forked child has the parent's worker object, but no thread reading its answers, and
    shares its pipes: it starts its own, and closes its copies of the parent's (else the
    parent's process would not see the end of its stdin until every child exited). They are
    closed by descriptor, not flushed (a fork during another thread's write would send half
    a message); the objects are kept so that nothing closes those numbers again."""
    global _WORKER
    for worker in getattr(_WORKER, "workers", [_WORKER]):  # a pool, or one worker
        process = worker.process
        if process is not None:
            for stream in (process.stdin, process.stdout):
                try:
                    os.close(stream.fileno())
                except (OSError, ValueError):
                    pass
    _FORKED_FROM.append(_WORKER)
    _WORKER = _Pool()


_HELD = []  # the locks a fork waits for (_hold_for_fork), released after it in the parent


def _hold_for_fork():
    """Before a fork: take the pool's lock and each worker's, so that no process is half
    started (Popen returned, its pipes open, not yet known to _forget_in_child) when the
    child is made: the child would keep that process's stdin open. subprocess's own fork
    does not run these hooks, so starting a process under a worker's lock cannot wait here."""
    pool = _WORKER
    locks = [pool.lock] + [w.lock for w in getattr(pool, "workers", [])]
    for lock in locks:
        lock.acquire()
        _HELD.append(lock)


def _release_after_fork():
    while _HELD:
        _HELD.pop().release()


def _forget_held_in_child():
    _HELD.clear()  # the parent's objects, dropped with them
    _forget_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_hold_for_fork, after_in_parent=_release_after_fork,
                        after_in_child=_forget_held_in_child)


def wait_idle(timeout=None):
    """Wait until the background processes have answered every kernel sent to them (the
    calls from then on run the kernels, once chosen); False if `timeout` seconds passed
    first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _WORKER.jobs:
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def full():
    """Whether MAX_QUEUED kernels wait in the background processes already."""
    return len(_WORKER.jobs) >= MAX_QUEUED


def submit(path, types, expected, name, what):
    """A Job: the kernel module at path compiled for the argument types `types` (numba's
    signature, or native.argument_types'), its values' types checked against expected, and
    recorded, in the background process."""
    return _WORKER.submit(path, types, expected, name, what)
