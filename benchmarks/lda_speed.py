"""Speed, memory and recovery of distdp's spectral LDA against scikit-learn and gensim.

    .venv/bin/python benchmarks/lda_speed.py                 # everything (≈ 30–60 min on 2 cores)
    .venv/bin/python benchmarks/lda_speed.py --corpora A --tools distdp   # a quick look

Corpora (written once under benchmarks/out/, synthetic LDA, α0 = 1, topic rows
~ Dirichlet(0.1), lengths 3 + Poisson(97)):
  A: N = 20,000,  d = 2,000,  k = 10
  B: N = 200,000, d = 10,000, k = 20
  C: N = 100,000, d = 50,000, k = 20   (memory: no O(d²) array)

Every configuration runs in a fresh subprocess. Peak memory is the driver's
peak RSS plus, for Ray runs, every shard actor's peak RSS (Ray's own daemons
excluded). "read" is reading the parquet corpus into one CSR matrix in one
process; for distdp, "fit" is the wall time after Ray has started: actors
reading their shards plus all passes ("compute" = fit minus the actors' read).
Competitors run with their defaults: scikit-learn's LatentDirichletAllocation
(learning_method="online") and gensim's LdaMulticore (passes=1, workers =
cores − 1); both get the same CSR matrix (gensim through Sparse2Corpus),
and their conversion time is not counted.

Writes benchmarks/results/lda_speed.json and lda_speed.png.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from distdp.api import ClusterOptions

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
RESULTS = HERE / "results"
CORPORA = {
    "A": dict(docs=20_000, vocab_size=2_000, topics=10, seed=1),
    "B": dict(docs=200_000, vocab_size=10_000, topics=20, seed=2),
    "C": dict(docs=100_000, vocab_size=50_000, topics=20, seed=3),
}


def ensure_corpus(name: str) -> Path:
    """Write corpus ``name`` (4 parquet shards) unless it is already there."""
    path = OUT / name
    if not (path / "truth" / "topic_word.npy").is_file():
        from distdp.cli import main

        c = CORPORA[name]
        main(["make-corpus", str(path), "--docs", str(c["docs"]), "--vocab-size", str(c["vocab_size"]),
              "--topics", str(c["topics"]), "--shards", "4", "--seed", str(c["seed"]), "--overwrite"])
    return path


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def l1(topic_word, path) -> float:
    from distdp.lda import matched_l1

    return matched_l1(np.asarray(topic_word), np.load(path / "truth" / "topic_word.npy"))[0]


# ------------------------------------------------------------------ one configuration (in a subprocess)
def run_one(config: str, corpus: str) -> dict:
    path = OUT / corpus
    k, d = CORPORA[corpus]["topics"], CORPORA[corpus]["vocab_size"]
    from distdp.io.corpus import read_corpus

    if config == "read":
        t = time.perf_counter()
        X = read_corpus(path, d)
        return {"seconds": time.perf_counter() - t, "nnz": int(X.nnz), "peak_bytes": peak_rss()}
    if config.startswith("distdp"):
        import distdp

        if config == "distdp-local":
            m = distdp.fit_lda(path, k, seed=0, progress=False, refiner="em", cluster=ClusterOptions(backend="local"))
            ray_start, extra = 0.0, 0
        else:
            import ray

            t = time.perf_counter()
            if config == "distdp-2nodes":
                from ray.cluster_utils import Cluster

                cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
                cluster.add_node(num_cpus=1)
                ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
                workers = 2
            else:
                ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
                workers = int(config.split("-")[1][0])
            ray_start = time.perf_counter() - t
            m = distdp.fit_lda(path, k, seed=0, progress=False, refiner="em", cluster=ClusterOptions(workers=workers))
            extra = sum(m.info["resources"]["actor_peak_rss_bytes"])
            ray.shutdown()
            if config == "distdp-2nodes":
                cluster.shutdown()
        t = m.info["timings_s"]
        return {"seconds": t["total"], "compute_seconds": t["total"] - t["read"], "ray_start": ray_start,
                "stages": t, "l1": l1(m.topic_word, path), "peak_bytes": peak_rss() + extra,
                "resources": m.info.get("resources", {})}
    X = read_corpus(path, d)
    base = peak_rss()
    if config == "sklearn-online":
        from sklearn.decomposition import LatentDirichletAllocation

        t = time.perf_counter()
        est = LatentDirichletAllocation(n_components=k, learning_method="online", random_state=0).fit(X)
        sec = time.perf_counter() - t
        tw = est.components_ / est.components_.sum(1, keepdims=True)
    elif config == "gensim-multicore":
        from gensim.matutils import Sparse2Corpus
        from gensim.models import LdaMulticore

        bow = list(Sparse2Corpus(X.astype(np.int64), documents_columns=False))
        t = time.perf_counter()
        est = LdaMulticore(bow, num_topics=k, id2word={i: str(i) for i in range(d)}, random_state=0)
        sec = time.perf_counter() - t
        tw = est.get_topics()
    else:
        raise ValueError(config)
    return {"seconds": sec, "l1": l1(tw, path), "peak_bytes": peak_rss(), "peak_bytes_before_fit": base}


# ------------------------------------------------------------------ orchestration
def spawn(config: str, corpus: str, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--run", config, "--corpus", corpus]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "TQDM_DISABLE": "1"})
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:.0f} s"}
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall_subprocess"] = time.perf_counter() - t
    return res


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, key, label in zip(axes, ("seconds", "peak_bytes", "l1"),
                              ("wall time (s, log)", "peak memory (MiB, log)", "topic L1 error (Hungarian)")):
        names, xs, cols = [], [], []
        for corpus, runs in results["runs"].items():
            for cfg, r in runs.items():
                if key in r:
                    names.append(f"{corpus}:{cfg}")
                    xs.append(r[key] / (2 ** 20 if key == "peak_bytes" else 1))
                    cols.append("tab:blue" if cfg.startswith("distdp") else "tab:gray" if cfg == "read" else "tab:orange")
        ax.barh(names, xs, color=cols)
        ax.set_title(label)
        if key != "l1":
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.invert_yaxis()
    fig.suptitle("distdp spectral LDA vs scikit-learn online LDA and gensim LdaMulticore (2-core machine)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--corpora", default="A,B,C")
    ap.add_argument("--tools", default="distdp,sklearn,gensim")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per configuration, seconds")
    args = ap.parse_args()
    if args.run:
        print(json.dumps(run_one(args.run, args.corpus), default=float))
        return
    tools = args.tools.split(",")
    results = {"machine": {"cpus": os.cpu_count()}, "runs": {}}
    out_json = RESULTS / "lda_speed.json"
    if out_json.is_file():
        results["runs"] = json.loads(out_json.read_text()).get("runs", {})
    RESULTS.mkdir(parents=True, exist_ok=True)
    for corpus in args.corpora.split(","):
        ensure_corpus(corpus)
        configs = ["read"]
        if "distdp" in tools:
            configs += ["distdp-local", "distdp-1worker", "distdp-2workers", "distdp-2nodes"]
        if corpus != "C":
            configs += [c for t, c in (("sklearn", "sklearn-online"), ("gensim", "gensim-multicore")) if t in tools]
        for cfg in configs:
            r = spawn(cfg, corpus, args.timeout)
            results["runs"].setdefault(corpus, {})[cfg] = r
            show = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                    if k in ("seconds", "compute_seconds", "l1", "error")}
            if "peak_bytes" in r:
                show["peak_MiB"] = round(r["peak_bytes"] / 2 ** 20)
            print(f"{corpus} {cfg:18s} {show}", flush=True)
            out_json.write_text(json.dumps(results, indent=2, default=float) + "\n")
    summary = {}
    for corpus, runs in results["runs"].items():
        read = runs.get("read", {}).get("seconds")
        best = runs.get("distdp-2workers", {})
        sk = runs.get("sklearn-online", {})
        if read and "seconds" in best:
            summary[corpus] = {"fit_over_read": best["seconds"] / read,
                               "compute_over_read": best["compute_seconds"] / read}
            if "seconds" in sk:
                summary[corpus].update(speedup_vs_sklearn=sk["seconds"] / best["seconds"],
                                       l1_ratio_vs_sklearn=best["l1"] / sk["l1"])
    results["summary"] = summary
    out_json.write_text(json.dumps(results, indent=2, default=float) + "\n")
    plot(results, RESULTS / "lda_speed.png")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
