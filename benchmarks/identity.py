"""Fingerprints of a fixed set of seeded runs, to show that a refactor keeps behaviour bit for bit.

Every run goes through the command line (``distdp.cli.main``), whose flags a
refactor keeps, so the same script runs on both sides of a change::

    python benchmarks/identity.py --out before.json      # on the old commit
    python benchmarks/identity.py --out after.json       # on the new one
    python benchmarks/identity.py --compare before.json after.json

An old checkout can run from the new one's virtual environment: ``cd`` out of
the new checkout (Ray puts the driver's directory on its workers' path) and
set ``PYTHONPATH=<old checkout>`` (passed on to the workers too).

Each output file is hashed (SHA-256): ``.npy`` files by their array bytes,
``.json`` files after dropping wall-clock fields and mapping renamed module paths (:data:`RENAMED`) (``timings_s``, ``timings``, ``seconds``,
``resources``), ``.parquet`` files by their column values, text files as
they are. The inputs are generated here from fixed seeds with NumPy and
pyarrow only. Private fits use ``--reproducible`` (seeded noise), which is
what makes them comparable.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

#: Texts in report notes that a refactor reworded (old → new), mapped before hashing so that only behaviour
#: is compared: the layout refactor of issue 40 moved ``distdp.privacy.lda_private`` and replaced citations of
#: an internal spec by the papers'.
RENAMED = {"distdp.privacy.lda_private": "distdp.lda.private.scalable", "lda_private.": "scalable.",
           ", SPEC §5(b))": ")", "(SPEC §5(a))": "(Thms G.5–G.8)"}
WALL_CLOCK = {"timings_s", "timings", "resources", "elapsed_s", "wall_s", "seconds"}
#: Report fields added after the baseline of the layout refactor (each release's ``sampler``, issue 41;
#: ``parameters.out_of_core``, issue 39), dropped so that a comparison with a checkout from before them still
#: compares the rest.
ADDED = {"sampler", "out_of_core"}


def _scrub(obj):
    """``obj`` without wall-clock fields and absolute paths (which differ between checkouts)."""
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items() if k not in WALL_CLOCK | ADDED}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    if isinstance(obj, str) and obj.startswith("/"):
        return Path(obj).name
    if isinstance(obj, str):
        for old, new in RENAMED.items():
            obj = obj.replace(old, new)
    return obj


def fingerprint(path: Path) -> str:
    """SHA-256 of one output file's content (see the module docstring for what is compared)."""
    h = hashlib.sha256()
    if path.suffix == ".npy":
        a = np.load(path, allow_pickle=False)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    elif path.suffix == ".json":
        h.update(json.dumps(_scrub(json.loads(path.read_text())), sort_keys=True).encode())
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        for name in t.column_names:
            h.update(name.encode())
            h.update(json.dumps(t.column(name).to_pylist(), default=str).encode())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def fingerprints(out: Path) -> dict:
    """Fingerprint of every file under ``out`` (a run's output directory or file)."""
    if out.is_file():
        return {out.name: fingerprint(out)}
    return {str(p.relative_to(out)): fingerprint(p) for p in sorted(out.rglob("*")) if p.is_file()}


def make_inputs(d: Path) -> dict:
    """The fixed inputs: a text CSV, a dense symmetric tensor, tensor points, a partially observed tensor."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2024)
    letters = "bcdfghjklmnp"
    words = ["".join(letters[(i // 12 ** j) % 12] for j in range(3)) + "a" for i in range(120)]
    topics = rng.dirichlet(np.full(120, 0.1), size=4)
    rows = []
    for n in range(2000):
        z = rng.dirichlet(np.full(4, 0.3))
        rows.append(" ".join(rng.choice(words, size=rng.integers(5, 40), p=z @ topics)))
    csv = d / "texts.csv"
    csv.write_text("id,text\n" + "\n".join(f"d{i},{t}" for i, t in enumerate(rows)) + "\n")
    V = np.linalg.qr(rng.standard_normal((8, 3)))[0]
    T = np.einsum("r,ir,jr,kr->ijk", np.array([3.0, 2.0, 1.0]), V, V, V)
    T = T + 1e-3 * rng.standard_normal(T.shape)
    T = (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0) + T.transpose(2, 0, 1)
         + T.transpose(2, 1, 0)) / 6
    np.save(d / "T.npy", T)
    X = rng.standard_normal((4000, 6)) @ np.diag([2.0, 1.5, 1.0, 0.5, 0.3, 0.2]) + 0.5
    offsets = pa.array(np.arange(0, X.size + 1, 6, dtype=np.int32))
    pq.write_table(pa.table({"x": pa.ListArray.from_arrays(offsets, pa.array(X.ravel()))}), d / "points.parquet")
    Y = np.einsum("ir,jr,kr->ijk", *[rng.uniform(0, 1, (n, 2)) for n in (12, 10, 8)])
    Y = 1 + 4 * Y / Y.max()
    Y[rng.random(Y.shape) < 0.5] = np.nan
    np.save(d / "Y.npy", Y)
    return {"csv": csv, "T": d / "T.npy", "points": d / "points.parquet", "Y": d / "Y.npy"}


def runs(d: Path, inp: dict) -> list[tuple[str, list[str], Path]]:
    """(name, argv, output) of every run, in order (later runs read earlier outputs)."""
    syn, txt = d / "syn", d / "txt"
    lda = ["--k", "4", "--local", "--no-progress", "--seed", "0"]
    priv = ["--epsilon", "2", "--delta", "1e-5", "--reproducible", "--vocab-public"]
    r = [
        ("make-corpus", ["make-corpus", str(syn), "--docs", "3000", "--vocab-size", "200", "--topics", "4",
                         "--doc-length", "40", "--shards", "2", "--seed", "1"], syn),
        ("prepare", ["prepare", str(inp["csv"]), "--text-column", "text", "--id-column", "id", "--out", str(txt),
                     "--max-vocab", "100", "--shards", "2"], txt),
        ("lda-default", ["fit-lda", str(syn), *lda, "--out", str(d / "m1")], d / "m1"),
        ("lda-text", ["fit-lda", str(txt), *lda, "--out", str(d / "m2")], d / "m2"),
        ("lda-refine0-randomized", ["fit-lda", str(syn), *lda, "--refine", "0", "--eigensolver", "randomized",
                                    "--out", str(d / "m3")], d / "m3"),
        ("lda-explicit-simultaneous", ["fit-lda", str(syn), *lda, "--tensor", "explicit", "--method",
                                       "simultaneous", "--out", str(d / "m4")], d / "m4"),
        ("lda-k10-fill", ["fit-lda", str(txt), "--k", "10", "--local", "--no-progress", "--seed", "0",
                          "--out", str(d / "m5")], d / "m5"),
        ("stm", ["fit-lda", str(syn), *lda, "--model", "stm", "--out", str(d / "m6")], d / "m6"),
        ("lda-ray", ["fit-lda", str(syn), "--k", "4", "--ray", "--workers", "2", "--no-progress", "--seed", "0",
                     "--out", str(d / "m7")], d / "m7"),
        ("transform", ["transform", str(d / "m1"), str(syn), "--local", "--out", str(d / "theta.parquet")],
         d / "theta.parquet"),
        ("coherence", ["coherence", str(d / "m2"), str(txt), "--local"], None),
        ("export", ["export", str(d / "m2"), str(txt), "--local", "--out", str(d / "vis")], d / "vis"),
    ]
    for mech in ("auto", "whitened", "power", "config1", "config2", "config3", "config4", "agn", "avn"):
        r.append((f"private-lda-{mech}", ["fit-lda", str(syn), *lda, *priv, "--mechanism", mech,
                                          "--out", str(d / f"p-{mech}")], d / f"p-{mech}"))
    for wh in ("dense", "matrix-free", "power"):
        r.append((f"private-lda-whitening-{wh}", ["fit-lda", str(syn), *lda, *priv, "--whitening", wh,
                                                  *(["--working-vocab", "60", "--epsilon", "50"] if wh == "power" else []), "--out", str(d / f"pw-{wh}")], d / f"pw-{wh}"))
    r += [
        ("private-lda-refine", ["fit-lda", str(syn), *lda, *priv, "--refine", "3", "--out", str(d / "pr")],
         d / "pr"),
        ("private-lda-ray", ["fit-lda", str(syn), "--k", "4", "--ray", "--workers", "2", "--no-progress", "--seed",
                             "0", *priv, "--out", str(d / "pray")], d / "pray"),
        ("private-stm", ["fit-lda", str(syn), *lda, *priv, "--model", "stm", "--out", str(d / "ps")], d / "ps"),
        ("private-prepare", ["prepare", str(inp["csv"]), "--text-column", "text", "--out", str(d / "ptxt"),
                             "--dp-vocab-epsilon", "1", "--dp-vocab-delta", "1e-5", "--max-words-per-doc", "20",
                             "--seed", "3", "--reproducible"], d / "ptxt"),
    ]
    dec = ["--k", "3", "--seed", "1"]
    for method in ("robust", "simultaneous"):
        r.append((f"decompose-{method}", ["decompose", str(inp["T"]), *dec, "--method", method,
                                          "--out", str(d / f"t-{method}")], d / f"t-{method}"))
    r += [
        ("decompose-private", ["decompose", str(inp["T"]), *dec, "--epsilon", "1", "--delta", "1e-6",
                               "--restarts", "4", "--iters", "5", "--reproducible", "--out", str(d / "t-dp")],
         d / "t-dp"),
        ("decompose-points-online", ["decompose", str(inp["points"]), "--k", "2", "--method", "online",
                                     "--iters", "8", "--seed", "0", "--out", str(d / "t-on")], d / "t-on"),
        ("decompose-points-ray", ["decompose", str(inp["points"]), "--k", "2", "--iters", "8", "--seed", "0",
                                  "--backend", "local", "--workers", "2", "--out", str(d / "t-pts")], d / "t-pts"),
    ]
    comp = ["complete", str(inp["Y"]), "--rank", "2", "--seed", "0", "--no-progress", "--epochs", "20"]
    r += [
        ("complete-cp", [*comp, "--out", str(d / "c-cp")], d / "c-cp"),
        ("complete-tucker", [*comp, "--model", "tucker", "--out", str(d / "c-tk")], d / "c-tk"),
        ("complete-input", [*comp, "--perturbation", "input", "--epsilon", "1", "--bounds", "1", "5",
                            "--reproducible", "--out", str(d / "c-in")], d / "c-in"),
        ("complete-gradient", [*comp, "--perturbation", "gradient", "--epsilon", "1", "--bounds", "1", "5",
                               "--reproducible",
                               "--out", str(d / "c-gr")], d / "c-gr"),
        ("complete-output", [*comp, "--perturbation", "output", "--epsilon", "1", "--bounds", "1", "5",
                             "--max-row-norm", "3", "--reproducible", "--out", str(d / "c-out")], d / "c-out"),
    ]
    return r


def run_all(keep: Path | None = None) -> dict:
    """Run every run in a fresh temporary directory; its fingerprints, or its exit code and stderr tail.

    With ``keep``, the outputs are copied there afterwards (to diff a report whose fingerprint changed).
    """
    from distdp.cli import main

    if os.environ.get("PYTHONPATH"):  # a checkout named by PYTHONPATH: Ray's workers must import it too
        import ray

        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        inp = make_inputs(d)
        for name, argv, out in runs(d, inp):
            so, se = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
                try:
                    rc = main(argv)
                except SystemExit as exc:
                    rc = exc.code
            entry = {"rc": rc}
            if rc == 0 and out is not None and out.exists():
                entry["files"] = fingerprints(out)
            elif rc != 0:
                entry["stderr"] = se.getvalue()[-400:].replace(tmp, "TMP")
            if out is None:
                entry["stdout"] = hashlib.sha256(_scrub_text(so.getvalue()).encode()).hexdigest()
            result[name] = entry
            print(f"{name}: rc={rc} files={len(entry.get('files', {}))}", file=sys.stderr)
        if keep is not None:
            shutil.copytree(d, keep, dirs_exist_ok=True)
    return result


def _scrub_text(s: str) -> str:
    """Printed output without lines that carry wall-clock times."""
    return "\n".join(line for line in s.splitlines() if " s)" not in line and "time" not in line.lower())


def compare(a: dict, b: dict) -> int:
    """Print every run whose fingerprints differ; 0 when all are bit-identical."""
    bad = 0
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            bad += 1
            ea, eb = a.get(name, {}), b.get(name, {})
            files = sorted(set(ea.get("files", {})) | set(eb.get("files", {})))
            diff = [f for f in files if ea.get("files", {}).get(f) != eb.get("files", {}).get(f)]
            print(f"DIFFERS {name}: rc {ea.get('rc')} → {eb.get('rc')}; files {diff}")
    n_files = sum(len(e.get("files", {})) for e in a.values())
    print(f"{len(a)} runs, {n_files} output files: {'all bit-identical' if not bad else f'{bad} runs differ'}")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", type=Path, help="write the fingerprints of this checkout's runs here")
    g.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    p.add_argument("--keep", type=Path, help="with --out: also copy every run's output files into this folder")
    a = p.parse_args(argv)
    if a.compare:
        return compare(*(json.loads(f.read_text()) for f in a.compare))
    a.out.write_text(json.dumps(run_all(a.keep), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
