"""tests/background.py: a subprocess run declared by a test module runs exactly once, whoever starts it, and
hands its output (or its failure) to the test that waits for it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import background
import pytest


def _job(name, code, timeout=60, tests=None):
    return background.Job(name, __name__, lambda out: [sys.executable, "-c", code, out], timeout, tests=tests)


def test_a_job_runs_once_whether_a_thread_or_the_test_starts_it(tmp_path):
    marks = tmp_path / "marks"
    code = f"import os, sys; open({str(marks)!r}, 'a').write('x'); print('folder', os.path.isdir(sys.argv[1]))"
    job = _job("once", code)
    results = []
    threads = [threading.Thread(target=lambda: results.append(job.result())) for _ in range(3)]
    for t in threads:
        t.start()
    results.append(job.result())
    for t in threads:
        t.join()
    assert marks.read_text() == "x"  # one run, four waiters
    assert all(r is results[0] for r in results)
    assert results[0].returncode == 0 and results[0].stdout.strip() == "folder True"
    job.stop()
    assert not os.path.exists(job.folder)


def test_a_timeout_reaches_the_waiting_test():
    job = _job("slow", "import time; time.sleep(30)", timeout=0.5)
    with pytest.raises(subprocess.TimeoutExpired):
        job.result()
    with pytest.raises(subprocess.TimeoutExpired):  # and every later waiter
        job.result()


def test_only_jobs_of_selected_tests_start(monkeypatch):
    monkeypatch.setenv("INERTIA_TEST_BACKGROUND", "1")
    a = _job("for_a", "print('a')", tests=("test_a[1]",))
    b = _job("for_b", "print('b')", tests=("test_b",))
    c = background.Job("for_c", __name__, lambda out: [sys.executable, "-c", "print('c')"], 60, fixture="report")
    d = background.Job("for_d", __name__, lambda out: [sys.executable, "-c", "print('d')"], 60, fixture="other")
    monkeypatch.setattr(background, "JOBS", {"for_a": a, "for_b": b, "for_c": c, "for_d": d})
    thread = background.start([(__name__, "test_a[1]", ("tmp_path",)), ("some_other_module", "test_b", ()),
                               (__name__, "test_c", ("report",))])
    thread.join(timeout=60)
    assert a.result().stdout.strip() == "a" and c.result().stdout.strip() == "c"
    assert b.claim() and d.claim()  # nobody started them: no selected test waits for them (this test owns them now)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the grandchild's state from /proc (Linux)")
def test_a_stopped_session_kills_the_interpreters_a_job_started(tmp_path):
    """``-x`` or an interrupt: the job's process group goes, grandchildren included."""
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            f" open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    job = _job("stopped", code)
    assert job.claim()
    runner = threading.Thread(target=job.run)
    runner.start()
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        threading.Event().wait(0.05)
    grandchild = int(pid_file.read_text())
    job.stop()
    runner.join(timeout=30)
    for _ in range(100):  # killed: gone, or a zombie of its (killed) parent until init reaps it
        try:
            with open(f"/proc/{grandchild}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        threading.Event().wait(0.05)
    else:
        raise AssertionError("the job's own child survived the stop")
