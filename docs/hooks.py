"""MkDocs hooks: pages and files generated at build time, so that they cannot drift from the code.

* ``reference/cli.md``: the CLI reference, written from ``distdp.cli.build_parser()`` (every
  sub-command, its usage line and each option with its default and help text).
* ``img/benchmarks/*.png``: the plots in ``benchmarks/results/``, served from there (not copied
  into ``docs/``), so a rerun benchmark shows its new plot on the next build.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CLI_PAGE = "reference/cli.md"
PLOTS = "img/benchmarks"


def on_files(files, config):
    """Add the generated CLI page and the benchmark plots to the site's files."""
    files.append(File.generated(config, CLI_PAGE, content=cli_markdown()))
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"{PLOTS}/{png.name}", abs_src_path=str(png)))
    return files


def _escape(text: str) -> str:
    """Text for a Markdown table cell: pipes, emphasis markers and angle brackets escaped, one line."""
    text = " ".join(str(text).split())
    for ch in ("\\", "|", "*", "_", "<", ">", "[", "]", "`"):
        text = text.replace(ch, "\\" + ch)
    return text


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help with ``%(default)s`` and the like expanded, as ``--help`` prints it."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = dict(vars(action), prog=parser.prog)
    for name in list(params):
        if params[name] is argparse.SUPPRESS:
            del params[name]
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return action.help % params if "%" in action.help else action.help


def _names(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return names
        if action.choices is not None and action.metavar is None:
            return f"{names} {{{','.join(str(c) for c in action.choices)}}}"
        metavar = action.metavar or action.dest.upper()
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        elif isinstance(action.nargs, int) and action.nargs > 1:
            metavar = " ".join([metavar] * action.nargs)
        return f"{names} {metavar}"
    return action.metavar or action.dest


def _default(action: argparse.Action) -> str:
    default = action.default
    if action.required or default in (None, False, argparse.SUPPRESS) or action.nargs == 0:
        return ""
    if isinstance(default, (list, tuple)):
        default = " ".join(str(d) for d in default)
    return f"`{default}`"


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    exclusive = {}
    for group in parser._mutually_exclusive_groups:
        members = [a for a in group._group_actions if a.help != argparse.SUPPRESS]
        for a in members:
            exclusive[a] = [b for b in members if b is not a]
    rows = ["| argument | default | description |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        text = _escape(_help(parser, action))
        if action.required and action.option_strings:
            text = "**required.** " + text
        if action in exclusive:
            others = ", ".join(o.option_strings[0] for o in exclusive[action])
            text += f" (not with {_escape(others)})"
        rows.append(f"| `{_names(action)}` | {_default(action)} | {text} |")
    return rows


def cli_markdown() -> str:
    """The CLI reference page, from the ``distdp`` argument parser."""
    from distdp.cli import build_parser

    parser = build_parser()
    subactions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    lines = [
        "# Command-line reference",
        "",
        "Generated from the `distdp` argument parser when the documentation is built; `distdp COMMAND --help`",
        "prints the same. Every command exits with status 2 and one line naming the problem on bad input;",
        "a private fit whose budget cannot be met also exits with 2 (see [Privacy](../guide/privacy.md)). A private",
        "fit stopped by an unexpected error (a defect or a cluster failure) prints its traceback and exits with 3.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for sub in subactions:
        for choice in sub._choices_actions:
            anchor = re.sub(r"[^a-z0-9-]", "", f"distdp-{choice.dest}".lower())
            lines.append(f"| [`{choice.dest}`](#{anchor}) | {_escape(choice.help or '')} |")
    for sub in subactions:
        helps = {c.dest: c.help for c in sub._choices_actions}
        for name, sp in sub.choices.items():
            usage = sp.format_usage().strip()
            usage = re.sub(r"^usage: ", "", usage)
            usage = re.sub(r"\n {7}", "\n", usage)  # continuation lines were indented under "usage: "
            lines += ["", f"## distdp {name}", ""]
            text = sp.description or helps.get(name) or ""
            if text:
                lines += [_escape(text[0].upper() + text[1:]) + ("" if text.endswith(".") else "."), ""]
            lines += ["```text", usage, "```", ""]
            lines += _options_table(sp)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # print the page, e.g. to review it
    print(cli_markdown())
