"""Subprocess runs that tests wait for, run on the core the test session leaves idle.

A few tests run a benchmark or a script in a fresh interpreter (as a user would) and check what it
reports: with a cold kernel cache those runs are minutes of the suite (the GPU check, the rollout, sim
rate and worlds benchmarks, the backward-code switch), while the pytest process runs one test at a time
on one of the machine's two cores. So a test module declares such a run as a :class:`Job` when it is
imported; once the session has selected its tests, ``conftest.py`` moves the modules that declared jobs
to the end of the session and starts one thread that runs their jobs one after the other (the last
needed first), beside the other tests. A fixture's :meth:`Job.result` returns the finished run, waits
for a running one, or runs it itself when no thread has started it (a module run alone, say). What the
tests check is unchanged: the same command, environment and timeout, each run in a fresh interpreter.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

JOBS: dict = {}  # name -> Job, in the order the modules were imported


class Job:
    """A subprocess run: ``make_cmd(folder)`` gives its argument list, with ``folder`` a new temporary
    folder of its own for output files (removed at the session's end)."""

    def __init__(self, name: str, module: str, make_cmd, timeout: float, cwd: str | None = None,
                 env: dict | None = None, tests: tuple | None = None, fixture: str | None = None):
        self.name, self.module, self.make_cmd, self.timeout, self.cwd = name, module, make_cmd, timeout, cwd
        self.env, self.tests, self.fixture = env, tests, fixture
        self._stopping = False
        self.folder: str | None = None
        self.completed: subprocess.CompletedProcess | None = None
        self.error: BaseException | None = None
        self._proc: subprocess.Popen | None = None
        self._state = "waiting"
        self._lock = threading.Lock()
        self._done = threading.Event()

    def claim(self) -> bool:
        """True (and the job is this caller's to run) when nobody has started it."""
        with self._lock:
            if self._state != "waiting":
                return False
            self._state = "running"
            return True

    def run(self) -> None:
        """Run the claimed job to its end (or its timeout), keeping what it printed."""
        try:
            self.folder = tempfile.mkdtemp(prefix=f"inertia-test-{self.name}-")
            cmd = self.make_cmd(self.folder)
            with self._lock:
                if self._stopping:
                    raise RuntimeError(f"background job {self.name}: the session ended before it started")
                # its own process group, so that a kill reaches the interpreters it starts too
                self._proc = subprocess.Popen(cmd, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True, start_new_session=os.name == "posix")
            try:
                out, err = self._proc.communicate(timeout=self.timeout)
            except BaseException:  # its timeout, or the test's (pytest-timeout) while the test runs it itself
                self._kill()
                self._proc.communicate()
                raise
            self.completed = subprocess.CompletedProcess(cmd, self._proc.returncode, out, err)
        except BaseException as e:  # noqa: BLE001 - handed to the test that waits for it
            self.error = e
        finally:
            with self._lock:
                self._state = "done"
            self._done.set()

    def result(self) -> subprocess.CompletedProcess:
        """The finished run: run here if nobody started it, else wait for it. Raises what the run raised
        (a timeout, say)."""
        if self.claim():
            self.run()
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.completed

    def json(self, name: str):
        """The JSON document ``name`` that the finished run wrote into its folder, after checking that it
        exited 0 (else the assertion shows the end of what it printed)."""
        import json

        proc = self.result()
        assert proc.returncode == 0, (f"{' '.join(map(str, proc.args[1:3]))} ({self.name}) failed:\n"
                                      f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        with open(os.path.join(self.folder, name)) as f:
            return json.load(f)

    def _kill(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if os.name == "posix":
            try:
                os.killpg(proc.pid, signal.SIGKILL)
                return
            except OSError:
                pass
        proc.kill()

    def stop(self) -> None:
        """At the session's end: keep a run from starting, kill one still going (the session stopped early)
        with the interpreters it started, and remove its folder."""
        with self._lock:
            self._stopping = True
            if self._state == "waiting":
                self._state = "done"  # never started: nothing to wait for
                return
        self._kill()
        self._done.wait(timeout=30)
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def job(name: str, make_cmd, timeout: float = 600, cwd: str | None = None, env: dict | None = None,
        tests: tuple | None = None, fixture: str | None = None) -> Job:
    """Declare a run (at a test module's import). ``make_cmd(folder) -> list`` of arguments. Which of the
    module's tests wait for it, so that a session that deselected them does not start it: those that use
    ``fixture`` (by name), or those named in ``tests`` (with their parameters, ``test_x[semi]``), or by
    default every test of the module."""
    module = sys._getframe(1).f_globals["__name__"]
    if name in JOBS:  # the same module imported again (pytest's rewrite): keep the first
        return JOBS[name]
    JOBS[name] = Job(name, module, make_cmd, timeout, cwd, env, tests, fixture)
    return JOBS[name]


def _waits_for(j: Job, module: str, test: str, fixtures) -> bool:
    if j.module != module:
        return False
    if j.fixture is not None:
        return j.fixture in fixtures
    return j.tests is None or test in j.tests


def start(items: list) -> threading.Thread | None:
    """Run the jobs that the selected test ``items`` (``(module name, test name, fixture names)`` in session
    order) wait for, on one background thread, the last needed first."""
    first_use: dict = {}
    for i, (module, test, fixtures) in enumerate(items):
        for j in JOBS.values():
            if j.name not in first_use and _waits_for(j, module, test, fixtures):
                first_use[j.name] = i
    jobs = sorted((JOBS[name] for name in first_use), key=lambda j: first_use[j.name])
    if not jobs or os.environ.get("INERTIA_TEST_BACKGROUND", "1") == "0":
        return None

    def run_all() -> None:
        for j in reversed(jobs):
            if j.claim():
                j.run()

    thread = threading.Thread(target=run_all, name="inertia-test-jobs", daemon=True)
    thread.start()
    return thread


def stop_all() -> None:
    for j in JOBS.values():
        j.stop()
