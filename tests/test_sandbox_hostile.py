"""The hostile-program suite: each program gets the right verdict within its limit, leaves no
process behind, and does not harm the grader. Run at the isolation level this machine allows
and again at the ``none`` fallback, so the fallback path is tested wherever the suite runs."""

from __future__ import annotations

import os
import socket
import threading
import time

import psutil
import pytest

from agon.sandbox import detect_isolation, grade_program, reaper, run_program
from agon.sandbox import uids as sandbox_uids
from agon.sandbox.batch import BATCH_LEVELS

LIMIT_S = 1.0
SLACK_S = 2.0  # a verdict may come this late on a busy 2-core machine, not later

LEVELS = sorted({detect_isolation(), "none"})


_BASELINE: set[int] = set()


@pytest.fixture(autouse=True)
def _children_before_the_test():
    """Children this process had before the test (worker pools of earlier tests in the same
    session) are not the sandbox's; anything in a run's uid range still counts."""
    _BASELINE.clear()
    _BASELINE.update(p.pid for p in psutil.Process().children(recursive=True))
    yield


def _ours() -> list[psutil.Process]:
    """Live processes a sandbox run of this test process could have left."""
    left = []
    if os.geteuid() == 0:  # every run has a uid of its own from this process's range
        base = sandbox_uids._uid_slots()._base
        for p in psutil.process_iter(["uids"]):
            try:
                uids = p.info["uids"]
                if (
                    uids and base <= uids.real < base + sandbox_uids.UID_SLOTS
                ):  # zombies too: nothing may linger
                    left.append(p)
            except psutil.Error:
                pass
    left += [p for p in psutil.Process().children(recursive=True) if p.pid not in _BASELINE]
    return left


def assert_nothing_left() -> None:
    deadline = time.monotonic() + 3.0
    while (left := _ours()) and time.monotonic() < deadline:
        time.sleep(0.05)
    names = []
    for p in left:
        try:
            names.append((p.pid, p.name(), p.status()))
        except psutil.Error:
            pass
    assert not names, f"sandbox left processes behind: {names}"


def assert_grader_fine(level: str) -> None:
    res = run_program("print(input()[::-1])", "olleh\n", timeout_s=10, isolation=level)
    assert res.status == "ok" and res.stdout == "hello\n", res


def hostile(level: str, code: str, stdin: str = "", expect: str = "", memory_mb: int = 256):
    t0 = time.perf_counter()
    v = grade_program(
        code, [(stdin, expect)], timeout_s=LIMIT_S, memory_mb=memory_mb, isolation=level
    )
    took = time.perf_counter() - t0
    assert took < LIMIT_S + SLACK_S, f"verdict took {took:.2f}s"
    assert_nothing_left()
    assert_grader_fine(level)
    return v


@pytest.fixture(params=LEVELS)
def level(request) -> str:
    return request.param


def test_fork_bomb(level):
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except Exception:\n        pass\n"
    )
    v = hostile(level, code)
    assert (v.status, v.correct) == ("timeout", False)


def test_infinite_loop(level):
    v = hostile(level, "while True:\n    pass\n")
    assert (v.status, v.correct) == ("timeout", False)


def test_sleep_forever(level):
    v = hostile(level, "import time\ntime.sleep(10**6)\n")
    assert (v.status, v.correct) == ("timeout", False)


def test_ten_gb_allocation(level):
    v = hostile(level, "x = bytearray(10 * 1024**3)\nprint(len(x))\n", expect=str(10 * 1024**3))
    assert (v.status, v.correct) == ("memory", False)


def test_unbounded_output(level):
    v = hostile(level, "while True:\n    print('x' * 4096)\n", expect="x")
    assert (v.status, v.correct) == ("wrong_answer", False)
    assert "stdout over" in v.detail


def test_unbounded_stderr(level):
    """Fresh runs drain stderr and drop it until the clock runs out; where tests share a
    sandbox (batch levels), stderr is a file, and the file size limit makes the program's
    writes fail (Python ignores SIGXFSZ: EFBIG, then exit 120 when stderr cannot flush)."""
    v = hostile(level, "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)\n", expect="x")
    if level in BATCH_LEVELS:
        assert (v.status, v.correct) == ("runtime_error", False)
    else:
        assert (v.status, v.correct) == ("timeout", False)


def test_reading_stdin_forever(level):
    v = hostile(level, "import sys\nwhile True:\n    sys.stdin.read()\n", stdin="1 2 3\n")
    assert (v.status, v.correct) == ("timeout", False)


# Without root the program runs as the grader's user (userns maps it to that user; `none`
# keeps it): it can write what that user can write. Documented in agon.sandbox.
needs_own_uid = pytest.mark.skipif(
    os.geteuid() != 0, reason="file protection needs a uid of its own (root)"
)


@needs_own_uid
def test_deleting_files_outside_its_dir(level, tmp_path):
    victim = tmp_path / "grader_file.txt"
    victim.write_text("precious")
    code = (
        "import os, shutil\n"
        f"os.remove({str(victim)!r})\n"
        f"shutil.rmtree({str(tmp_path)!r})\n"
        "print('deleted')\n"
    )
    v = hostile(level, code, expect="deleted")
    assert victim.read_text() == "precious"
    assert (v.status, v.correct) == ("runtime_error", False)


def test_opening_a_socket(level):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        end = time.monotonic() + LIMIT_S + SLACK_S
        while time.monotonic() < end:
            try:
                conn, _ = server.accept()
                accepted.append(conn)
                return
            except OSError:
                continue

    t = threading.Thread(target=accept)
    t.start()
    code = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
        "s.sendall(b'exfiltrate')\n"
        "print('connected')\n"
    )
    try:
        v = hostile(level, code, expect="connected")
    finally:
        t.join()
        server.close()
    assert not accepted, "the sandboxed program reached a socket of the grader"
    assert (v.status, v.correct) == ("runtime_error", False)
    assert (
        "Error" in v.detail and "ModuleNotFoundError" not in v.detail
    )  # refused, not unimportable


def test_reading_the_parents_environment(level, monkeypatch):
    if level == "none" and os.geteuid() != 0:
        pytest.skip("as the same user, /proc/<grader>/environ is readable (documented fallback)")
    secret = "agon-secret-" + os.urandom(8).hex()
    monkeypatch.setenv("AGON_TEST_SECRET", secret)
    code = (
        "import os\n"
        "print(dict(os.environ))\n"
        f"for pid in (os.getppid(), {os.getpid()}, 1):\n"
        "    try:\n"
        "        print(open('/proc/%d/environ' % pid, 'rb').read())\n"
        "    except Exception as e:\n"
        "        print('denied', pid, type(e).__name__)\n"
    )
    res = run_program(code, timeout_s=5, isolation=level)
    assert res.status == "ok", res
    assert secret not in res.stdout
    assert "AGON_TEST_SECRET" not in res.stdout
    assert_nothing_left()


def test_killing_its_parent(level):
    code = (
        "import os, signal\n"
        f"for pid in (os.getppid(), {os.getpid()}, -1):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except Exception:\n"
        "        pass\n"
        "print('still here')\n"
    )
    v = hostile(level, code, expect="still here")
    assert psutil.Process().is_running()
    if level in BATCH_LEVELS:  # its parent is the supervisor of its tests: its run ends
        assert (v.status, v.correct) == ("runtime_error", False)
        assert "the run ended during test 1" in v.detail
    else:  # its parent is the namespace's init, which SIGKILL from inside cannot touch
        assert (v.status, v.correct) == ("pass", True)


def _many(level: str, code: str, tests: list, **kw):
    t0 = time.perf_counter()
    v = grade_program(code, tests, timeout_s=LIMIT_S, memory_mb=256, isolation=level, **kw)
    took = time.perf_counter() - t0
    assert_nothing_left()
    assert_grader_fine(level)
    return v, took


def test_a_test_cannot_reach_into_the_next(level):
    """Test 1 leaves an orphan in a new session that would print into test 2's output, and
    tries to rewrite test 2's input and the problem's files; test 2 sees none of it."""
    code = (
        "import os, time\n"
        "x = input()\n"
        "open('output.txt', 'w').write(open('input.txt').read())\n"
        "if x == 'one':\n"
        "    for name in ('tests/1', 'input.txt'):\n"
        "        try:\n"
        "            open(name, 'w').write('hacked\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(0.3)\n"
        "        open('output.txt', 'a').write('orphan\\n')\n"
        "        os._exit(0)\n"
        "else:\n"
        "    time.sleep(0.6)\n"
    )
    tests = [("one\n", "one"), ("two\n", "two")]
    if level == "none":  # the audit guard refuses fork: the program fails instead
        v, _ = _many(level, code, tests, input_file="input.txt", output_file="output.txt")
        assert v.correct is False
        return
    v, _ = _many(level, code, tests, input_file="input.txt", output_file="output.txt")
    assert (v.status, v.tests_passed, v.tests_total) == ("pass", 2, 2), v.detail


def test_stopping_its_supervisor_times_out(level):
    """A program can stop a supervisor of its own uid; the grader's clock still ends the run
    within the test's limit plus the supervisor's slack."""
    code = (
        "import os, signal\n"
        "if input() == 'two':\n"
        "    os.kill(os.getppid(), signal.SIGSTOP)\n"
        "    while True:\n"
        "        pass\n"
        "print('ok')\n"
    )
    v, took = _many(level, code, [("one\n", "ok"), ("two\n", "ok")])
    if level == "none":  # the audit guard refuses os.kill: the program fails instead
        assert (v.correct, v.tests_passed) == (False, 1)
        return
    assert (v.status, v.correct, v.tests_passed) == ("timeout", False, 1)
    assert took < 2 * LIMIT_S + SLACK_S + 1.0, f"verdict took {took:.2f}s"


def test_closing_its_own_stdout(level):
    code = "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n"
    v = hostile(level, code, expect="x")
    assert (v.status, v.correct) == ("timeout", False)
    v = hostile(level, "import os\nos.close(1)\nprint('lost')\n", expect="lost")
    assert v.correct is False and v.status in ("runtime_error", "wrong_answer")


def test_orphan_in_a_new_session(level):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(10**6)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "print('done')\n"
    )
    # under the `none` fallback the audit guard refuses fork: the program fails instead
    v = hostile(level, code, expect="done")
    if level == "none":
        assert v.correct is False
    else:
        assert (v.status, v.correct) == ("pass", True)
        assert v.seconds < LIMIT_S  # it did not wait for the orphan


def test_marker_scan_kills_escapees():
    """The fallback's last line: a process that carries a run's marker is found and killed,
    wherever it was reparented (here: a new session, not our child's group)."""
    marker = "test" + os.urandom(4).hex()
    env = {**os.environ, reaper._MARKER_VAR: marker}
    p = psutil.Popen(["sleep", "1000"], env=env, start_new_session=True)
    time.sleep(0.2)  # until exec: before it, /proc shows the environment of this process
    killed = reaper._kill_marked(marker)
    p.wait(timeout=5)
    assert [k.pid for k in killed] == [p.pid]


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid-range check applies to root runs")
def test_leftover_check_can_fail():
    """The suite's 'nothing left' check sees a process in a run's uid range."""
    uid = sandbox_uids._uid_slots()._base + sandbox_uids.UID_SLOTS - 1
    p = psutil.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"],
        start_new_session=True,
    )
    try:
        time.sleep(0.2)
        assert any(q.pid == p.pid for q in _ours())
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid sweep is the root fallback")
def test_uid_sweep_kills_escapees_without_the_marker():
    """The root fallback's other last line: every process of the run's uid is killed."""
    uid = sandbox_uids._uid_slots()._base + sandbox_uids.UID_SLOTS - 2
    p = psutil.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "1000"],
        start_new_session=True,
        env={},
    )
    time.sleep(0.2)
    killed = reaper._kill_uid(uid)
    p.wait(timeout=5)
    assert [k.pid for k in killed] == [p.pid]
