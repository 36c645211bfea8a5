"""The code that runs inside the sandbox before the program: the bootstrap and the init shell.

Both are source text handed to the sandbox on its command line, not modules the program could
import. The bootstrap (``_BOOT``) runs under the sandbox's interpreter (``python -I -S``,
standard library only, so any CPython 3.8+ or PyPy will do) and sets the limits before the
program is even compiled, so the program starts already bound by them. The init shell
(``_INIT_SH``) is the PID 1 of a run's PID namespace (:mod:`agon.sandbox.isolation` puts it in
the wrapper command). Both report on a private pipe that the program never holds, so that
:mod:`agon.sandbox.run` can tell a program that failed from a sandbox that never started it.
"""

import inspect
import os
import stat

# The bootstrap runs as ``python -I -S -c BOOT FD CPU AS FSIZE NOFILE NPROC GUARD``. It sets
# the limits, optionally installs the audit guard, sends "S" on FD (the program starts),
# closes FD, and runs prog.py as __main__ in a fresh module. The program never holds FD, so
# it cannot forge the start message nor the exit report below.
#
# In a PID namespace the run's init (PID 1) is a shell, not the program: a namespace's init
# ignores signals it has no handler for, CPU-limit signals included. The shell waits for the
# program and sends "W<status>" on FD (the shell's status: 128+N for signal N), which
# ``unshare`` would not pass on for a signal. A program that exits with 128+N itself reads as
# killed by signal N: a failure either way.
# (dash redirects only fds 0-9 by number; the pipe's number may be higher, so it is reopened
# through /proc, which is the same pipe)
_INIT_SH = 'fd=$1; shift; "$@"; echo "W$?" > /proc/self/fd/$fd'
_BOOT = r"""
import os, sys, resource
def _agon_boot():
    fd, cpu, mem, fsize, nofile, nproc, guard = (int(x) for x in sys.argv[1:8])
    limits = [(resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (mem, mem)),
              (resource.RLIMIT_FSIZE, (fsize, fsize)), (resource.RLIMIT_NOFILE, (nofile, nofile)),
              (resource.RLIMIT_NPROC, (nproc, nproc)), (resource.RLIMIT_CORE, (0, 0))]
    for res, lim in limits:
        resource.setrlimit(res, lim)
    os.setsid()
    if guard:
        blocked = ("socket.__new__", "socket.connect", "socket.bind", "ctypes.dlopen",
                   "ctypes.dlsym", "ctypes.cdata", "os.system", "os.exec", "os.posix_spawn",
                   "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn",
                   "os.kill", "os.killpg")
        def hook(event, args, blocked=frozenset(blocked)):
            if event in blocked:
                raise PermissionError("sandbox: " + event + " is not allowed")
        sys.addaudithook(hook)
    os.write(fd, b"S")
    os.close(fd)
    with open("prog.py", "rb") as f:
        src = f.read()
    sys.argv = ["prog.py"]
    return compile(src, "prog.py", "exec")
_agon_code = _agon_boot()
_agon_main = type(sys)("__main__")
_agon_main.__file__ = "prog.py"
_agon_main.__builtins__ = __builtins__
sys.modules["__main__"] = _agon_main
exec(_agon_code, _agon_main.__dict__)
"""

# The supervisor runs a program on many tests in one sandbox, as ``python -I [-S] -c SUPERVISE FD
# N CPU AS FSIZE NOFILE NPROC WALL_MS OUTCAP ERRCAP IN OUT`` (IN / OUT: the problem's input /
# output file names, "" for none). The grader has written test k's input to ``tests/k``. The
# namespaces, the uid drop and the interpreter are set up once per program; each test is a fork of
# the supervisor that takes its limits, its stdin from ``tests/k`` and its stdout and stderr into
# files, runs the program as the bootstrap above does, and ends as the interpreter ends a program
# (threads joined, atexit run, buffers flushed) but without finalizing the interpreter, which is
# most of what a short test costs. The supervisor waits at most WALL_MS for it, then kills every
# process left in the PID namespace (``kill(-1)`` spares only the namespace's init and the
# supervisor), so nothing of test k lives into test k+1, and sends one record on its stdout: ``T k
# KIND VALUE MICROSECONDS OUTLEN ERRLEN\n`` then the output (OUT if the program wrote it, else
# stdout; at most OUTCAP + 1 bytes, so the grader can see an overflow) and the head of stderr.
# KIND: 0 exited with VALUE, 1 killed by signal VALUE, 2 past the wall clock, 3 the test could not
# be started (VALUE: errno). The grader stops the run as soon as it has seen a failing test. Only
# used where a PID namespace bounds ``kill(-1)``; the supervisor refuses to run unless it is PID 2
# (the init's first child) with parent PID 1, which is only true there.
#
# The supervisor touches the run's dir only in ways a planted symlink or hard link cannot turn:
# the tests through a dir fd opened before any test ran, new files with O_EXCL | O_NOFOLLOW, reads
# of regular files with one link only.
_SUPERVISE_SOURCE = r"""
import os, sys, resource, select, signal, stat, time
#READ_REGULAR#
def _agon_wait(pid, wall):
    deadline = time.monotonic() + wall
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status, False
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                return os.waitpid(pid, 0)[1], True
            if pfd is not None:
                select.select([pfd], [], [], left)
            else:
                time.sleep(min(left, 0.002))
    finally:
        if pfd is not None:
            os.close(pfd)
def _agon_child(k, tests, chan, limits):
    os.close(chan)
    new = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    i = os.open(str(k), os.O_RDONLY, dir_fd=tests)
    o = os.open(".agon_out", new, 0o600)
    e = os.open(".agon_err", new, 0o600)
    for src, dst in ((i, 0), (o, 1), (e, 2)):
        os.dup2(src, dst)
        os.close(src)
    os.close(tests)
    os.setsid()
    for res, lim in limits:
        resource.setrlimit(res, lim)
def _agon_supervise():
    a = sys.argv[1:]
    fd, n, cpu, mem, fsize, nofile, nproc, wall_ms, outcap, errcap = (int(x) for x in a[:10])
    infile, outfile = a[10] or None, a[11] or None
    # kill(-1) below must only ever reach a PID namespace of our own: there the init shell is
    # PID 1 and its first child, this process, PID 2 (on a host, PID 2 is the kernel's
    # kthreadd). Anywhere else, refuse before reporting a start: the grader sees a
    # sandbox_error, never a host-wide kill.
    if os.getpid() != 2 or os.getppid() != 1:
        sys.exit("supervisor: not the first process of a PID namespace; refusing to run")
    limits = [(resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (mem, mem)),
              (resource.RLIMIT_FSIZE, (fsize, fsize)), (resource.RLIMIT_NOFILE, (nofile, nofile)),
              (resource.RLIMIT_NPROC, (nproc, nproc)), (resource.RLIMIT_CORE, (0, 0))]
    os.setsid()
    tests = os.open("tests", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with open("prog.py", "rb") as f:
            code = compile(f.read(), "prog.py", "exec")
    except Exception as err:  # each test raises it, as a fresh run of the program would
        code = err
    os.write(fd, b"S")
    os.close(fd)
    chan = os.dup(1)
    for k in range(n):
        for name in (".agon_out", ".agon_err", infile, outfile):
            if name:
                try:
                    os.unlink(name)
                except OSError:
                    pass
        kind = value = 0
        t0 = time.monotonic()
        try:
            if infile:
                src = os.open(str(k), os.O_RDONLY, dir_fd=tests)
                dst = os.open(infile, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                try:
                    while chunk := os.read(src, 1 << 20):
                        os.write(dst, chunk)
                finally:
                    os.close(src)
                    os.close(dst)
            pid = os.fork()
        except OSError as err:
            kind, value, pid = 3, err.errno or 0, -1
        if pid == 0:
            try:
                _agon_child(k, tests, chan, limits)
            except BaseException:
                os._exit(125)
            return code
        if pid > 0:
            status, late = _agon_wait(pid, wall_ms / 1000.0)
            if late:
                kind = 2
            elif os.WIFSIGNALED(status):
                kind, value = 1, os.WTERMSIG(status)
            else:
                value = os.waitstatus_to_exitcode(status)
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        micros = int((time.monotonic() - t0) * 1e6)
        out = read_regular(outfile, outcap + 1) if outfile else None
        if out is None:
            out = read_regular(".agon_out", outcap + 1) or b""
        err = read_regular(".agon_err", errcap) or b""
        msg = b"T %d %d %d %d %d %d\n" % (k, kind, value, micros, len(out), len(err)) + out + err
        view = memoryview(msg)
        while view:
            view = view[os.write(chan, view):]
        if kind == 3:
            return None
    return None
def _agon_exit_code(err):
    # what the interpreter makes of an uncaught SystemExit (_Py_HandleSystemExit)
    code = err.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1
def _agon_test(code):
    # One test: run the program as `python prog.py` would, then end as the interpreter ends a
    # program (non-daemon threads joined, atexit run, std streams flushed: exit 120 if they
    # cannot be) without finalizing the interpreter, which is most of a short test's cost.
    sys.argv = ["prog.py"]
    main = type(sys)("__main__")
    main.__file__ = "prog.py"
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    status = 0
    try:
        if isinstance(code, BaseException):
            raise code
        exec(code, main.__dict__)
    except SystemExit as err:
        status = _agon_exit_code(err)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        import atexit
        atexit._run_exitfuncs()
    except SystemExit as err:
        status = _agon_exit_code(err)
    except BaseException:
        sys.excepthook(*sys.exc_info())
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120
    os._exit(status)
_agon_code = _agon_supervise()
if _agon_code is None:
    os._exit(0)
_agon_test(_agon_code)
"""


def read_regular(path, cap):
    """Up to ``cap`` bytes (bytes, or None) of the regular file at ``path``, None if there is none.

    The file was made by the program, so it is read as hostile: a symlink is not followed (it
    could point at the grader's secrets), a file with other names (a hard link) is refused, and
    a FIFO or device is never opened for a blocking read. Self-contained: its source also runs
    inside the sandbox, in the supervisor.
    """

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        chunks, left = [], cap
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# (no annotations above: the supervisor may run on an older interpreter than the grader's)
_SUPERVISE = _SUPERVISE_SOURCE.replace("#READ_REGULAR#\n", inspect.getsource(read_regular))
