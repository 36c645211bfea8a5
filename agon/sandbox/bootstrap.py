"""The code that runs inside the sandbox before the program: the bootstrap and the init shell.

Both are source text handed to the sandbox on its command line, not modules the program could
import. The bootstrap (``_BOOT``) runs under the sandbox's interpreter (``python -I -S``,
standard library only, so any CPython 3.8+ or PyPy will do) and sets the limits before the
program is even compiled, so the program starts already bound by them. The init shell
(``_INIT_SH``) is the PID 1 of a run's PID namespace (:mod:`agon.sandbox.isolation` puts it in
the wrapper command). Both report on a private pipe that the program never holds, so that
:mod:`agon.sandbox.run` can tell a program that failed from a sandbox that never started it.
"""

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
