"""`agon sandbox run PROG.py [--stdin FILE] [--expect FILE] [--timeout S] [--memory-mb M]`.

Runs one program in the sandbox and prints one JSON object: the verdict (``status``; with
``--expect``, pass / wrong_answer against the expected output), exit code, seconds, the
isolation level, and the capped stdout and stderr. ``agon sandbox info`` prints the isolation
level this machine allows. Exit status: 0 for ok / pass, 1 for any other verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agon.sandbox.grade import outputs_match
from agon.sandbox.run import detect_isolation, run_program

PRINT_CAP = 10_000  # characters of stdout / stderr echoed in the JSON line


def _read(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"agon sandbox run: {what} file {path!r} does not exist")
    return p.read_text(encoding="utf-8", errors="surrogateescape")


def cmd_run(args: argparse.Namespace) -> int:
    """Run PROG.py once and print its verdict as JSON."""

    code = _read(args.program, "program")
    stdin = _read(args.stdin, "--stdin") if args.stdin else ""
    res = run_program(
        code,
        stdin,
        timeout_s=args.timeout,
        memory_mb=args.memory_mb,
        site_packages=args.site_packages,
    )
    status = res.status
    if args.expect is not None:
        expected = _read(args.expect, "--expect")
        if status == "ok":
            status = "pass" if outputs_match(res.stdout, expected) else "wrong_answer"
        elif status == "output_limit":
            status = "wrong_answer"
    payload = {
        "status": status,
        "exit_code": res.exit_code,
        "seconds": round(res.seconds, 4),
        "isolation": res.isolation,
        "stdout": res.stdout[:PRINT_CAP],
        "stderr": res.stderr[:PRINT_CAP],
        "stdout_truncated": res.stdout_truncated or len(res.stdout) > PRINT_CAP,
        "stderr_truncated": res.stderr_truncated or len(res.stderr) > PRINT_CAP,
        "detail": res.detail,
    }
    print(json.dumps(payload))
    return 0 if status in ("ok", "pass") else 1


def cmd_info(args: argparse.Namespace) -> int:
    """Print the isolation level the sandbox uses here."""

    print(json.dumps({"isolation": detect_isolation()}))
    return 0


def add_parser(subparsers) -> None:
    """Register `agon sandbox` and its subcommands."""
    p = subparsers.add_parser("sandbox", help="run untrusted Python programs in the sandbox")
    sub = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    sub.required = True
    run = sub.add_parser("run", help="run PROG.py once and print one JSON verdict")
    run.add_argument("program", metavar="PROG.py", help="the Python program to run")
    run.add_argument("--stdin", metavar="FILE", help="file given to the program as stdin")
    run.add_argument(
        "--expect", metavar="FILE", help="expected stdout: the verdict becomes pass or wrong_answer"
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="wall-clock limit in seconds (default 5)",
    )
    run.add_argument(
        "--memory-mb",
        type=int,
        default=512,
        metavar="M",
        help="address-space limit in MiB (default 512)",
    )
    run.add_argument(
        "--site-packages",
        action="store_true",
        help="let the program import installed packages (default: standard library only)",
    )
    run.set_defaults(func=cmd_run)
    info = sub.add_parser("info", help="print the isolation level this machine allows")
    info.set_defaults(func=cmd_info)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="agon")
    add_parser(parser.add_subparsers())
    ns = parser.parse_args()
    sys.exit(ns.func(ns))
