"""The README's commands run as written, so they cannot drift from the code.

* The blocks marked ``<!-- readme-test: cli -->`` (bash) and ``<!-- readme-test: python -->`` are
  executed in a temporary directory: the first with the installed ``distdp`` command, the second
  with this interpreter, on the corpora the first one wrote.
* Every other ``distdp …`` and ``python jobs/….py …`` command in the README (the cluster example,
  the privacy paragraph) is parsed by the real argument parser, and the job script must exist.
* ``make`` targets named in the README exist in the Makefile; relative links point at files.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARKED = re.compile(r"<!-- readme-test: (\w+) -->\n```(\w+)\n(.*?)^```", re.S | re.M)
JOBS = {"fit_lda.py": "fit-lda", "decompose.py": "decompose", "complete.py": "complete"}


def readme() -> str:
    return README.read_text(encoding="utf-8")


def marked_block(name: str) -> str:
    blocks = {m.group(1): m.group(3) for m in MARKED.finditer(readme())}
    assert name in blocks, f"README has no block marked <!-- readme-test: {name} -->"
    return blocks[name]


def shell_commands(block: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def all_command_lines() -> list[list[str]]:
    """Every command in every bash block, and every inline code span that is a ``distdp`` command."""
    text = readme()
    commands = [c for m in FENCE.finditer(text) if m.group(1) == "bash" for c in shell_commands(m.group(2))]
    prose = FENCE.sub("", text)
    commands += [shlex.split(span) for span in re.findall(r"`(distdp [^`]+)`", prose) if "--out" in span]
    return commands


def test_readme_is_short():
    assert len(readme().splitlines()) <= 250


def test_make_targets_exist():
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make (\w+)`", readme()))
    named |= {c[1] for c in all_command_lines() if c[0] == "make"}
    assert {"demo", "test", "docs"} <= named
    assert named <= targets, f"README names make targets the Makefile lacks: {named - targets}"


def test_relative_links_resolve():
    for target in re.findall(r"\]\(([^)\s]+)\)", readme()):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README links to a missing file: {target}"


def test_every_command_line_parses():
    from distdp.cli import build_parser

    parsed = 0
    for words in all_command_lines():
        if words[0] == "ray" and "--" in words:  # ray job submit … -- python jobs/….py …
            words = words[words.index("--") + 1:]
        if words[0] == "distdp" and words[1:] and not words[1].startswith("-") and "COMMAND" not in words:
            argv = words[1:]
        elif words[0] == "python" and len(words) > 1 and words[1].startswith("jobs/"):
            script = ROOT / words[1]
            assert script.is_file(), f"README runs a missing job script: {words[1]}"
            argv = [JOBS[script.name], *words[2:]]
        else:
            continue
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse exits 2 on a bad option
            pytest.fail(f"README command does not parse ({exc}): {shlex.join(words)}")
        parsed += 1
    assert parsed >= 8


def _distdp_on_path(tmp_path: Path) -> dict:
    """The environment for the CLI block: the installed ``distdp`` script, else a shim running this interpreter."""
    bindir = Path(sys.executable).parent
    if not (bindir / "distdp").is_file():
        bindir = tmp_path / "_bin"
        bindir.mkdir()
        shim = bindir / "distdp"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m distdp.cli "$@"\n')
        shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               RAY_USAGE_STATS_ENABLED="0", TQDM_DISABLE="1", PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)  # the README's fits run in process
    return env


def _articles_csv(path: Path, n: int = 60) -> None:
    """A small ``articles.csv`` with a ``body`` column of English text, for ``distdp prepare``."""
    themes = [
        "the central bank raised interest rates again as inflation pushed prices and wages higher",
        "the football club won the league after a late goal from their young striker at home",
        "researchers found the new vaccine protected patients in a clinical trial across hospitals",
    ]
    rows = ["id,body"]
    for i in range(n):
        words = themes[i % 3].split()
        body = " ".join(words[j % len(words)] for j in range(i % 5, i % 5 + 14))
        rows.append(f'{i},"{body}"')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_cli_and_python_examples_run(tmp_path):
    env = _distdp_on_path(tmp_path)
    _articles_csv(tmp_path / "articles.csv")
    cli = subprocess.run(["bash", "-euo", "pipefail", "-c", marked_block("cli")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    for path in ["data/synth/vocab.txt", "data/news/vocab.txt", "models/synth/topic_word.npy",
                 "models/synth/model.json", "theta.parquet", "vis/topic_term_dists.npy"]:
        assert (tmp_path / path).exists(), path
    assert "mean" in cli.stdout.lower() or "npmi" in cli.stdout.lower(), cli.stdout[-2000:]

    code = marked_block("python")
    code += textwrap.dedent("""
        import numpy as np
        assert model.topic_word.shape == (5, 500) and np.allclose(model.topic_word.sum(1), 1)
        assert theta.shape == (5000, 5) and np.allclose(theta.sum(1), 1)
    """)
    py = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                        timeout=300)
    assert py.returncode == 0, py.stdout[-3000:] + py.stderr[-3000:]
    assert (tmp_path / "models/py/topic_word.npy").exists()
