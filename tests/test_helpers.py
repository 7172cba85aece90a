"""The shared test helpers, on every machine: the GPU tests that use them skip in CI."""
import threading

from helpers import run_in_threads, run_python


def test_run_in_threads_reports_what_each_thread_found_and_raised():
    started = threading.Barrier(4, timeout=10)  # all four run at once

    def work(i):
        started.wait()
        if i == 1:
            return "wrong result"
        if i == 2:
            raise ValueError("broken")

    errors = run_in_threads(work, 4)
    assert sorted(errors) == ["thread 1: wrong result", "thread 2: ValueError('broken')"]


def test_run_python_passes_the_environment_and_dedents():
    done = run_python("""
        import os
        print(os.environ["KILN_TEST_VALUE"])
    """, {"KILN_TEST_VALUE": "seen"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "seen\n"
