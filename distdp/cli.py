"""Command-line interface: argument parsing only; every command calls the Python API.

Each command module exposes ``register(subparsers)``, which adds its sub-command
and sets ``func`` on the parser to a callable taking the parsed namespace.
"""
from __future__ import annotations

import argparse
import importlib
import sys

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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError) as exc:  # bad input or parameters: one clear line, exit 2
        print(f"distdp {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
