"""Command-line interface: argument parsing only; every command calls the Python API.

Each command module exposes ``register(subparsers)``, which adds its sub-command
and sets ``func`` on the parser to a callable taking the parsed namespace.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
import traceback
import warnings

# One module per group of commands; each owns its arguments.
COMMAND_MODULES = (
    "distdp.commands.corpus",   # make-corpus, prepare
    "distdp.commands.lda",      # fit-lda
    "distdp.commands.decompose",  # decompose
    "distdp.commands.complete",  # complete (DP tensor completion)
)


def build_parser() -> argparse.ArgumentParser:
    """Return the ``distdp`` argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="distdp",
        description="Differentially private spectral topic models and tensor decompositions on Ray.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``distdp`` script; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    refused = _relative_out_in_ray_job(argv)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    with _exit_cleanly_on_sigterm(), warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = _one_line_warnings(args.command, warnings.showwarning)
        try:
            return int(args.func(args) or 0)
        except (ValueError, OSError) as exc:  # bad input or parameters: one clear line, exit 2
            print(f"distdp {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except RuntimeError as exc:  # a private run's unexpected error: its traceback, then what it means
            from distdp.privacy.ledger import PrivateRunInternalError

            if not isinstance(exc, PrivateRunInternalError):
                raise
            traceback.print_exception(exc.__cause__, file=sys.stderr)
            print(f"distdp {args.command}: {exc}", file=sys.stderr)
            return INTERNAL_ERROR_EXIT


#: Exit status of a private run stopped by an unexpected error (2: bad input or parameters).
INTERNAL_ERROR_EXIT = 3


#: Set by Ray in a submitted job's driver.
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def _relative_out_in_ray_job(argv: list[str]) -> str | None:
    """The error line for a relative ``--out`` inside a submitted Ray job, else None (checked before parsing).

    A job's current directory is the unpacked copy of its ``working_dir``,
    which Ray deletes: an output written there is lost. Outside a job the
    arguments pass through unchanged.
    """
    if RAY_JOB_ENV not in os.environ or not argv:
        return None
    out = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--out"),
               next((a[len("--out="):] for a in argv if a.startswith("--out=")), None))
    if out is None or os.path.isabs(out) or "://" in out:
        return None
    return (f"distdp {argv[0]}: error: --out {out!r} is a relative path; a Ray job runs in a copy of its working "
            "directory that Ray deletes: give an absolute path on the node that runs the job (the head node) or "
            "on a shared mount")


@contextlib.contextmanager
def _exit_cleanly_on_sigterm():
    """While a command runs, SIGTERM (``kill``, ``ray job stop``) raises ``SystemExit(143)``.

    Python's default is to die at once; as an exception it unwinds, so the
    atomic writers (:mod:`distdp.io.atomic`) remove their temporary
    directories and leave no partial output. The previous handler is put
    back afterwards; nothing is changed outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _one_line_warnings(command: str, fallback):
    """A ``warnings.showwarning`` printing a user's warning as one line, as it happens.

    Warnings of other categories (numpy's, Ray's) keep Python's format through ``fallback``.
    """
    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, UserWarning):
            print(f"distdp {command}: warning: {message}", file=sys.stderr)
        else:
            fallback(message, category, filename, lineno, file, line)
    return show


if __name__ == "__main__":
    sys.exit(main())
