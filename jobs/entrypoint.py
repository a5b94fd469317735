"""What the job entrypoints share: run a ``distdp`` command with this script's arguments.

Inside a submitted Ray job (``RAY_JOB_CONFIG_JSON_ENV_VAR`` is set) a relative ``--out`` is refused
before any work: the job's current directory is the unpacked copy of its ``working_dir``, which Ray
deletes, so the output would be lost. Outside a job the arguments pass through unchanged.
"""
import os
import sys


def _out_argument(argv):
    """The value of ``--out`` in ``argv`` (``--out X`` or ``--out=X``), or None."""
    for i, arg in enumerate(argv):
        if arg == "--out" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--out="):
            return arg[len("--out="):]
    return None


def run(command):
    argv = sys.argv[1:]
    out = _out_argument(argv)
    if out is not None and not os.path.isabs(out) and "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        print(f"distdp {command}: error: --out {out!r} is a relative path; a Ray job runs in a copy of its "
              "working directory that Ray deletes: give an absolute path on the node that runs the job "
              "(the head node) or on a shared mount", file=sys.stderr)
        return 2
    from distdp.cli import main

    return main([command, *argv])
