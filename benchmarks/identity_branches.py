"""Fingerprints of the private fit's noise-dependent branches, forced, for a before/after bit-identity check.

`identity.py` runs fixed command lines, and a private fit's branches (the whitening's early rung, first
release and top-up, the working vocabulary's restart) depend on the noise, so a command line may never take
some of them. Here each is forced by replacing its gate (as tests/distributed/test_private_branches.py
does), on every whitening form and tensor mechanism, in process, seeded (``reproducible=True``)::

    PYTHONPATH=<old checkout> python benchmarks/identity_branches.py --out before.json
    PYTHONPATH=<new checkout> python benchmarks/identity_branches.py --out after.json
    python benchmarks/identity_branches.py --compare before.json after.json

Each run is hashed as its topics and α (array bytes) and every ``model.json`` section but the timings and
the corpus's path (SHA-256).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

K, D = 5, 300
#: (whitening form, tensor mechanism, model, forced branch, whether the plan has the early rung)
CASES = [("dense", "whitened", "lda", "early", True), ("dense", "whitened", "lda", "first", True),
         ("dense", "whitened", "lda", "topup", True), ("matrix-free", "whitened", "lda", "first", False),
         ("matrix-free", "whitened", "lda", "topup", False), ("power", "whitened", "lda", None, False),
         ("dense", "power", "lda", "topup", True), ("dense", "whitened", "stm", "topup", False),
         ("matrix-free", "power", "lda", None, False), ("dense", "whitened", "lda", None, False)]


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(model) -> dict:
    """SHA-256 of the topics and α, and of each ``model.json`` section (timings and the corpus path dropped)."""
    info = {k: v for k, v in model.info.items() if k != "timings_s"}
    info["corpus"] = {k: v for k, v in info["corpus"].items() if k != "source"}
    arrays = np.ascontiguousarray(model.topic_word).tobytes() + np.ascontiguousarray(model.alpha).tobytes()
    return {"topics": _hash(arrays),
            **{k: _hash(json.dumps(v, sort_keys=True, default=str).encode()) for k, v in info.items()}}


def run_all() -> dict:
    """Every forced branch, the working vocabulary's restart and two unforced defaults: name → digest."""
    import distdp
    from distdp.api import ClusterOptions, PrivacyOptions
    from distdp.io import corpus as cio
    from distdp.lda.private import pipeline as pp
    from distdp.lda.private import scalable as sc
    from distdp.lda.synthetic import sample_corpus

    tmp = Path(tempfile.mkdtemp(prefix="identity_branches_"))
    c = sample_corpus(6000, D, K, np.random.default_rng(4), alpha0=0.8, background=0.3, lengths="lognormal")
    path = cio.write_corpus(tmp / "c", c.counts, n_shards=3, vocab=[f"w{i}" for i in range(D)], row_group_size=500)
    gates = {n: getattr(sc, n) for n in ("needs_topup", "WHITENING_TOPUP_SNR", "RESTART_TOKEN_SHARE", "restart_snr")}
    per_topic = pp.WORKING_VOCAB_PER_TOPIC

    def reset():
        for n, v in gates.items():
            setattr(sc, n, v)
        pp.WORKING_VOCAB_PER_TOPIC = per_topic

    def fit(seed, **privacy):
        return distdp.fit_lda(path, K, alpha0=1.0, seed=seed, progress=False, coherence=False,
                              model=privacy.pop("model", "lda"),
                              privacy=PrivacyOptions(delta=1e-6, reproducible=True, **privacy),
                              cluster=ClusterOptions(backend="local", workers=3))

    out = {}
    try:
        for form, mechanism, model, branch, rung in CASES:
            reset()
            if branch == "first" and rung:          # the rung falls short, the first release suffices
                answers = iter([True, False])
                sc.needs_topup = lambda eig, level, ratio=None: next(answers)
            elif branch is not None:
                sc.WHITENING_TOPUP_SNR = 1e9 if branch == "topup" else 0.0
            out[f"{form}-{mechanism}-{model}-{branch}"] = digest(fit(
                2, epsilon=100.0, working_vocab=150, whitening=form, mechanism=mechanism, model=model))
        reset()
        pp.WORKING_VOCAB_PER_TOPIC, sc.RESTART_TOKEN_SHARE = 20, 1.0
        sc.restart_snr = lambda plan: 0.0
        m = fit(2, epsilon=30.0, working_vocab="auto")
        if not m.info["corpus"]["working_vocab_restart"]["made"]:
            raise RuntimeError("the forced restart was not made")
        out["restart"] = digest(m)
        reset()
        for eps in (10.0, 40.0):
            out[f"default-eps{eps:g}"] = digest(fit(3, epsilon=eps))
    finally:
        reset()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.loads(p.read_text()) for p in args.compare)
        differ = [name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
        for name in differ:
            fields = sorted(f for f in set(a.get(name, {})) | set(b.get(name, {}))
                            if a.get(name, {}).get(f) != b.get(name, {}).get(f))
            print(f"{name}: differs in {', '.join(fields)}")
        print(f"{len(a)} runs: {'all bit-identical' if not differ else f'{len(differ)} differ'}")
        return 1 if differ else 0
    if args.out is None:
        ap.error("give --out or --compare")
    args.out.write_text(json.dumps(run_all(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
