"""The sandbox's ordinary behaviour: runs, limits, grading, the pool, the harness, the CLI."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

import pytest

from agon.grading.verdict import Verdict
from agon.sandbox import (
    SandboxPool,
    call_program,
    check_program,
    detect_isolation,
    grade_program,
    isolation,
    outputs_match,
    reaper,
    run,
    run_program,
    uids,
)
from agon.sandbox.batch import BATCH_LEVELS

ECHO_SUM = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"


def test_runs_a_program_on_stdin():
    res = run_program(ECHO_SUM, "1 2 3\n4\n")
    assert (res.status, res.exit_code, res.stdout) == ("ok", 0, "10\n")
    assert res.isolation == detect_isolation()
    assert 0 < res.seconds < 5


def test_standard_library_is_importable():
    code = (
        "import math, heapq, bisect, itertools, functools, collections, re, json, fractions,"
        " decimal, random, string, array, socket\nprint('ok')\n"
    )
    for level in sorted({detect_isolation(), "none"}):
        res = run_program(code, isolation=level, timeout_s=10)
        assert res.stdout == "ok\n", (level, res.stderr)


def test_works_when_the_grader_holds_many_fds():
    """The report pipe then gets a number above 9, which a shell cannot redirect by number."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(20)]
    try:
        res = run_program("import sys\nsys.exit(3)\n")
        assert (res.status, res.exit_code) == ("runtime_error", 3), res
    finally:
        for fd in held:
            os.close(fd)


def test_program_has_a_session_of_its_own_and_no_terminal():
    code = (
        "import os\nprint(os.getsid(0) == os.getpid())\n"
        "try:\n    open('/dev/tty')\n    print('tty')\nexcept OSError:\n    print('no tty')\n"
    )
    for level in sorted({detect_isolation(), "none"}):
        assert run_program(code, isolation=level).stdout == "True\nno tty\n", level


@pytest.mark.skipif(
    isolation.sandbox_python() != sys.executable,
    reason="the sandbox's interpreter has its own site-packages",
)
def test_site_packages_only_when_asked():
    code = "import psutil\nprint('imported')\n"  # a dependency of agon, so installed here
    assert run_program(code).status == "runtime_error"
    assert grade_program(code, [("", "imported")], site_packages=True).status == "pass"


def test_large_stdin_and_stdout_round_trip():
    data = "\n".join(str(i) for i in range(200_000)) + "\n"  # ~1.3 MB, far over a pipe buffer
    res = run_program("import sys\nsys.stdout.write(sys.stdin.read())\n", data, timeout_s=20)
    assert res.status == "ok" and res.stdout == data and not res.stdout_truncated


def test_stdin_not_read_does_not_block():
    res = run_program("print('ignored stdin')\n", "x" * 1_000_000, timeout_s=10)
    assert res.status == "ok" and res.stdout == "ignored stdin\n"


def test_stderr_is_capped_and_kept():
    res = run_program("import sys\nsys.stderr.write('e' * 10**6)\nprint('fine')\n", timeout_s=10)
    assert res.status == "ok" and res.stdout == "fine\n"
    assert res.stderr_truncated and len(res.stderr) == run.STDERR_CAP


def test_runtime_error_and_exit_codes():
    res = run_program("import sys\nsys.exit(3)\n")
    assert (res.status, res.exit_code) == ("runtime_error", 3)
    res = run_program("def f(n):\n    return f(n + 1)\nf(0)\n")
    assert res.status == "runtime_error" and "RecursionError" in res.stderr


@pytest.mark.parametrize("level", sorted({detect_isolation(), "none"}))
def test_cpu_limit_gives_timeout_before_the_wall_clock(level):
    # The program lowers its own CPU limit (allowed); SIGXCPU must reach it even in a PID
    # namespace, whose init ignores such signals: the program is not the init.
    code = (
        "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1, 2))\nwhile True:\n    pass\n"
    )
    res = run_program(code, timeout_s=30.0, isolation=level)
    assert (res.status, res.exit_code) == ("timeout", -24) and res.seconds < 20


def test_memory_limit_is_a_parameter():
    code = "x = bytearray(300 * 1024 * 1024)\nprint('ok')\n"
    assert run_program(code, memory_mb=200, timeout_s=10).status == "memory"
    assert run_program(code, memory_mb=1024, timeout_s=10).status == "ok"


def test_environment_is_scrubbed_and_dir_is_fresh_and_removed(tmp_path, monkeypatch):
    code = (
        "import os, json\n"
        "print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(),"
        " 'files': os.listdir('.')}))\n"
    )
    # the sandboxes' folders go to a temp dir of this test's own: another process's sandboxes
    # (a workflow evaluating code beside the tests) must not count as left behind
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "agon-sbx-*")))
    a = json.loads(run_program(code).stdout)
    b = json.loads(run_program(code).stdout)
    assert set(a["env"]) <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "PYTHONIOENCODING",
        reaper._MARKER_VAR,
        "LC_CTYPE",
        "PWD",
    }  # PWD: the init shell's
    assert a["cwd"] != b["cwd"] and a["files"] == ["prog.py"]
    assert not os.path.exists(a["cwd"]) and not os.path.exists(b["cwd"])
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "agon-sbx-*"))) <= before


def test_program_can_write_in_its_own_dir_only_up_to_the_file_size_limit():
    code = "open('scratch.txt', 'w').write('x' * 1000)\nprint(len(open('scratch.txt').read()))\n"
    assert run_program(code).stdout == "1000\n"
    big = f"open('big', 'wb').write(b'x' * {(run.FSIZE_MB + 1) * 1024 * 1024})\n"
    assert run_program(big, memory_mb=512, timeout_s=10).status == "runtime_error"


@pytest.mark.skipif(
    os.geteuid() != 0 or detect_isolation() != "namespaces", reason="root + namespaces only"
)
def test_root_runs_have_their_own_uid_no_capabilities_and_no_network():
    code = (
        "import os, socket\n"
        "caps = [l.split()[1] for l in open('/proc/self/status')"
        " if l.startswith(('CapEff', 'CapPrm'))]\n"
        "print(os.getuid(), os.getpid(), *caps)\n"
        "print(socket.if_nameindex())\n"
    )
    res = run_program(code)
    uid, pid, eff, prm = res.stdout.split("\n")[0].split()
    assert int(uid) >= uids.UID_BASE and pid == "2"  # the child of its PID namespace's init
    assert int(eff, 16) == 0 and int(prm, 16) == 0
    assert "'lo'" in res.stdout and "eth" not in res.stdout  # only the (down) loopback


def test_sandbox_error_when_the_program_cannot_start():
    res = run_program("print(1)\n", python="/nonexistent/python")
    assert res.status == "sandbox_error" and res.exit_code is None


def test_a_program_cannot_forge_a_sandbox_error():
    code = "import sys\nsys.stderr.write('unshare: failed\\n')\nsys.exit(1)\n"
    assert run_program(code).status == "runtime_error"


def test_forced_isolation_env(monkeypatch):
    monkeypatch.setenv(isolation.ISOLATION_ENV, "none")
    run.detect_isolation.cache_clear()
    try:
        assert detect_isolation() == "none"
        assert run_program("print(2)").isolation == "none"
        monkeypatch.setenv(isolation.ISOLATION_ENV, "bogus")
        run.detect_isolation.cache_clear()
        with pytest.raises(ValueError, match="AGON_SANDBOX_ISOLATION"):
            detect_isolation()
    finally:
        monkeypatch.delenv(isolation.ISOLATION_ENV)
        run.detect_isolation.cache_clear()


def test_fallback_guard_refuses_sockets_and_subprocesses():
    for code in (
        "import socket\nsocket.socket()\n",
        "import subprocess\nsubprocess.run(['true'])\n",
        "import os\nos.system('true')\n",
    ):
        res = run_program(code, isolation="none")
        assert res.status == "runtime_error" and "sandbox:" in res.stderr, code


# --- grading -----------------------------------------------------------------------------


def test_outputs_match_ignores_whitespace_layout_only():
    assert outputs_match("1 2\n3\n", "1 2 3")
    assert outputs_match("a  \n\n", "a")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("1.0", "1")


def test_grade_program_verdicts_and_first_failure():
    tests = [("1 2\n", "3"), ("5 5\n", "10"), ("0 0\n", "0")]
    v = grade_program(ECHO_SUM, tests)
    assert isinstance(v, Verdict) and (v.correct, v.status) == (True, "pass")
    wrong = (
        "import sys\nn = sum(map(int, sys.stdin.read().split()))\nprint(n if n < 5 else n + 1)\n"
    )
    v = grade_program(wrong, tests)
    assert (v.correct, v.status) == (False, "wrong_answer") and v.detail.startswith("test 2/3")
    v = grade_program("raise SystemExit(1)\n", tests)
    assert (v.correct, v.status) == (False, "runtime_error") and v.detail.startswith("test 1/3")
    v = grade_program(ECHO_SUM, [])
    assert (v.correct, v.status) == (None, "sandbox_error")


def test_pool_grades_in_order_with_none_code():
    codes = [ECHO_SUM, None, "print(0)\n", "while True: pass\n", ECHO_SUM]
    tests = [[("1 1", "2")], [("", "")], [("1 1", "2")], [("", "")], [("2 2", "4"), ("3 3", "6")]]
    with SandboxPool(workers=2) as pool:
        out = pool.grade(codes, tests, timeout_s=1.0)
    assert [v.status for v in out] == ["pass", "no_code", "wrong_answer", "timeout", "pass"]
    assert [v.correct for v in out] == [True, False, False, False, True]
    with pytest.raises(ValueError):
        SandboxPool(1).grade([None], [])


@pytest.mark.parametrize("level", sorted({detect_isolation(), "none"}))
def test_sandbox_error_is_none_not_zero(level, monkeypatch):
    """A sandbox that cannot start the program scores nothing: None, not a wrong answer,
    for one test and for many (the batch runner's path)."""
    monkeypatch.setenv("AGON_SANDBOX_PYTHON", "/nonexistent/python")
    with SandboxPool(workers=1, isolation=level) as pool:
        vs = pool.grade(["print(1)", "print(1)"], [[("", "1")], [("", "1"), ("x", "1")]])
    assert [(v.correct, v.status) for v in vs] == [(None, "sandbox_error")] * 2


# --- function-call harness ---------------------------------------------------------------


def test_check_program_pass_fail_and_early_exit_hack():
    test = (
        "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
    )
    good = "def add(a, b):\n    print('debug output is ignored')\n    return a + b\n"
    bad = "def add(a, b):\n    return a - b\n"
    hack = "import os\nprint('passed')\nos._exit(0)\n"
    hack2 = (
        "import sys\ndef add(a, b):\n    return 0\n"
        "sys.stdout = sys.__stdout__\nprint('agon-ok-0')\n"
    )
    results = {}
    for name, sol in [("good", good), ("bad", bad), ("hack", hack), ("hack2", hack2)]:
        prog, tests = check_program(sol, test, "add")
        results[name] = grade_program(prog, tests)
    assert results["good"].status == "pass"
    assert results["bad"].status == "wrong_answer"
    assert results["hack"].correct is False and results["hack2"].correct is False
    prog, tests = check_program("def add(a, b):\n    raise KeyError(a)\n", test, "add")
    assert grade_program(prog, tests).status == "runtime_error"


def test_call_program_function_and_solution_class():
    calls = [([[1, 2, 3]], 6), ([[]], 0)]
    prog, tests = call_program("def total(xs):\n    return sum(xs)\n", "total", calls)
    assert grade_program(prog, tests).status == "pass"
    cls = "class Solution:\n    def total(self, xs):\n        return sum(xs) + 0.0\n"
    prog, tests = call_program(cls, "total", calls)
    assert grade_program(prog, tests).status == "pass"
    prog, tests = call_program("def total(xs):\n    return 1\n", "total", calls)
    v = grade_program(prog, tests)
    assert v.status == "wrong_answer" and "call 1" in v.detail
    prog, tests = call_program("def other(xs):\n    return 1\n", "total", calls)
    assert grade_program(prog, tests).status == "wrong_answer"
    # TACO / APPS wrap outputs in a one-element list
    prog, tests = call_program(
        "def f(a):\n    return (a, a)\n", "f", [([1], [[1, 1]])], unwrap_single=True
    )
    assert grade_program(prog, tests).status == "pass"


# --- CLI ---------------------------------------------------------------------------------


def _cli(*args: str) -> tuple[int, dict]:
    out = subprocess.run(
        [sys.executable, "-m", "agon", "sandbox", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return out.returncode, (
        json.loads(out.stdout) if out.stdout.strip() else {"stderr": out.stderr}
    )


def test_cli_run_with_stdin_and_expect(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(ECHO_SUM)
    (tmp_path / "in.txt").write_text("2 3\n")
    (tmp_path / "good.txt").write_text("5\n")
    (tmp_path / "bad.txt").write_text("6\n")
    rc, out = _cli(
        "run",
        str(prog),
        "--stdin",
        str(tmp_path / "in.txt"),
        "--expect",
        str(tmp_path / "good.txt"),
    )
    assert rc == 0 and out["status"] == "pass" and out["exit_code"] == 0 and out["stdout"] == "5\n"
    assert {"seconds", "isolation", "stderr", "stdout_truncated"} <= set(out)
    rc, out = _cli(
        "run", str(prog), "--stdin", str(tmp_path / "in.txt"), "--expect", str(tmp_path / "bad.txt")
    )
    assert rc == 1 and out["status"] == "wrong_answer"
    loop = tmp_path / "loop.py"
    loop.write_text("while True: pass\n")
    rc, out = _cli("run", str(loop), "--timeout", "0.5", "--memory-mb", "128")
    assert rc == 1 and out["status"] == "timeout"
    rc, out = _cli("run", str(tmp_path / "missing.py"))
    assert rc != 0 and "does not exist" in out["stderr"]


def test_pool_runs_each_distinct_program_once_per_call(monkeypatch):
    """Repeated (program, tests) pairs share one run and one verdict; distinct ones do not."""
    import agon.sandbox.grade as grade_mod

    calls = []
    real = grade_mod.grade_program

    def counting(code, tests, *args, **kwargs):
        calls.append((code, tuple(tests)))
        return real(code, tests, *args, **kwargs)

    monkeypatch.setattr(grade_mod, "grade_program", counting)
    echo, wrong = "print(input())", "print('no')"
    t1, t2 = [("a\n", "a")], [("b\n", "b")]
    with SandboxPool(2) as pool:
        verdicts = pool.grade([echo, echo, wrong, echo, None], [t1, t1, t1, t2, t1], timeout_s=5.0)
    assert [v.status for v in verdicts] == ["pass", "pass", "wrong_answer", "pass", "no_code"]
    assert sorted(calls) == sorted({(echo, tuple(t1)), (wrong, tuple(t1)), (echo, tuple(t2))})


# --- many tests in one sandbox (agon.sandbox.batch) -----------------------------------------

ENDINGS = {
    "exit_code": "import sys\nprint(3)\nsys.exit(3)\n",
    "exit_message": "import sys\nprint(3)\nsys.exit('bye')\n",
    "exit_zero_early": "import sys\nsys.exit(0)\nprint(3)\n",
    "exception": "print(3)\nraise ValueError('x')\n",
    "syntax_error": "print(3\n",
    "atexit": "import atexit\natexit.register(lambda: print(3))\n",
    "thread_after_main": (
        "import threading, time\n"
        "def late():\n    time.sleep(0.2)\n    print(3)\n"
        "threading.Thread(target=late).start()\n"
    ),
    "stdout_closed": "print(3)\nimport os\nos.close(1)\n",
    "memory": "x = bytearray(2 * 1024**3)\nprint(3)\n",
    "recursion": "import sys\nsys.setrecursionlimit(10**6)\nf = lambda n: f(n + 1)\nf(0)\n",
    "reads_all_stdin": "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
}


def test_tests_in_one_sandbox_end_as_fresh_runs_do():
    """Each way a program can end gets the same verdict whether its tests share a sandbox
    (one fork per test, no interpreter finalization) or each test runs afresh."""
    level = detect_isolation()
    if level not in BATCH_LEVELS:
        pytest.skip(f"isolation {level!r} has no PID namespace: tests always run afresh")
    tests = [("1 2\n", "3"), ("2 1\n", "3")]
    for name, code in ENDINGS.items():
        shared = grade_program(code, tests, memory_mb=256)
        fresh = [run_program(code, stdin, memory_mb=256) for stdin, _ in tests]
        fresh_status = next(
            (r.status for r in fresh if r.status != "ok" or r.stdout.split() != ["3"]), "pass"
        )
        fresh_status = "wrong_answer" if fresh_status == "ok" else fresh_status
        assert shared.status == fresh_status, (name, shared, fresh)
        if shared.status == "runtime_error":
            assert shared.detail.split(":")[1] == f" exit {fresh[0].exit_code}", (name, shared)


def test_tests_share_a_sandbox_and_stop_at_the_first_failure(tmp_path):
    """A program that counts its runs in a file of its dir: tests share the dir (one sandbox),
    each test's process is fresh, and the run stops at the first failing test."""
    code = (
        "import os\n"
        "n = int(open('count').read()) if os.path.exists('count') else 0\n"
        "open('count', 'w').write(str(n + 1))\n"
        "print(n, input())\n"
    )
    tests = [("a\n", "0 a"), ("b\n", "1 b"), ("c\n", "9 c"), ("d\n", "3 d")]
    v = grade_program(code, tests)
    if detect_isolation() in BATCH_LEVELS:
        assert (v.status, v.tests_passed, v.tests_total) == ("wrong_answer", 2, 4)
        assert "test 3/4: got '2 c\\n'" in v.detail
    else:  # afresh: every run starts in an empty dir
        assert (v.status, v.tests_passed) == ("wrong_answer", 1)


def test_supervisor_refuses_to_run_outside_a_pid_namespace(tmp_path):
    """Its kill(-1) must never reach a host: started directly (zero tests, so nothing would be
    killed even if the guard failed), it exits before reporting a start."""
    from agon.sandbox.bootstrap import _SUPERVISE

    (tmp_path / "tests").mkdir()
    (tmp_path / "prog.py").write_text("print(1)\n")
    r, w = os.pipe()
    try:
        args = [w, 0, 1, 256 << 20, 16 << 20, 64, 32, 1000, 4096, 4096, "", ""]
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _SUPERVISE, *map(str, args)],
            cwd=tmp_path,
            pass_fds=(w,),
            capture_output=True,
            text=True,
            timeout=30,
        )
        os.close(w)
        w = None
        report = os.read(r, 64)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    assert out.returncode == 1 and "refusing to run" in out.stderr
    assert report == b""


def test_file_io_problem_reads_and_writes_its_files():
    """input_file holds the test's input (stdin too); output_file is the answer when written,
    stdout otherwise."""
    files = {"input_file": "input.txt", "output_file": "output.txt"}
    by_file = "open('output.txt', 'w').write(str(sum(map(int, open('input.txt').read().split()))))"
    by_stdout = "print(sum(map(int, input().split())))"
    tests = [("1 2\n", "3"), ("5 5\n", "10")]
    for level in sorted({detect_isolation(), "none"}):
        for code in (by_file, by_stdout):
            v = grade_program(code, tests, isolation=level, **files)
            assert (v.status, v.tests_passed) == ("pass", 2), (level, code, v)
        bad = grade_program(by_file, tests, isolation=level, input_file="../x")
        assert (bad.status, bad.correct) == ("sandbox_error", None)
        assert "not a plain file name" in bad.detail
