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
    a = _job("for_a", "print('a')", tests=("test_a[1]",))
    b = _job("for_b", "print('b')", tests=("test_b",))
    monkeypatch.setattr(background, "JOBS", {"for_a": a, "for_b": b})
    thread = background.start([(__name__, "test_a[1]"), ("some_other_module", "test_b")])
    thread.join(timeout=60)
    assert a.result().stdout.strip() == "a"
    assert b.claim()  # nobody started it: its test was not selected (and this test now owns it)
