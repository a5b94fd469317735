"""Scale: a large synthetic LDA corpus with Zipf-like word frequencies, fitted on Ray; time, memory from the OS, L1.

    .venv/bin/python benchmarks/scale.py --shape b --workers 2     # 1M docs, d = 50,000, k = 100
    .venv/bin/python benchmarks/scale.py --shape s --workers 2     # 200k docs, d = 20,000, k = 50 (quick)

Shapes (α0 = 5, lengths Poisson(mean tokens); topics as ``distdp make-corpus``
draws them — rows ~ Dirichlet(0.1), α = α0 · Dirichlet(10·1) — or, with
``--topics zipf``, rows ~ Dirichlet(0.1·d·f) over Zipf word frequencies
``f_j ∝ 1/(j + 10)``, so frequent words are frequent in every topic, as in
real text, which makes recovery much harder):

- ``s``: 200,000 documents, d = 20,000, k = 50, 150 tokens;
- ``m``: 1,000,000 documents, d = 20,000, k = 20, 100 tokens (the issue's worker-sweep shape);
- ``b``: 1,000,000 documents, d = 50,000, k = 100, 150 tokens (issue's 1M × 50k shape);
- ``w``: 3,500,000 documents, d = 100,000, k = 100, 150 tokens (Wikipedia-shaped).

Each corpus is written once under ``benchmarks/out/scale-<shape>/`` (parquet,
8 files; ``-zipf`` appended with ``--topics zipf``). Then, each in a fresh process: (1) the one-process read of the
parquet corpus into CSR (time, and the CSR's bytes); (2) the spectral fit
(``refine=0``, no coherence pass) on Ray with ``--workers`` shard actors.
Memory is read from the OS (``/proc``): every process of the fit — the
driver and all its descendants (Ray's GCS, raylet, dashboard agents, the
shard actors) — sampled every 0.2 s. Reported: the peak of their summed
proportional set size (``Pss`` of ``smaps_rollup``: a page shared by m
processes, such as Ray's object store, counts 1/m in each, so the sum is the
physical memory of the fit), each process's peak ``Pss``, and each process's
own peak resident size (``VmHWM``, which counts shared pages in full). The model of memory the fit is checked against:
each actor holds its CSR (12 bytes per nonzero: float64 value, int32 index)
plus O(block·k + d·k) working arrays; the driver O(d·k + k³).

``--out-of-core``: the actors keep no documents and read their row groups again for every pass
(``ClusterOptions(out_of_core=True)``); ``--sweep 1,2,4,8,16``: the worker sweep (each worker count in
fresh processes, ``--repeats`` rounds, medians), end to end: Ray's start, then ``fit_lda`` (actors' start,
read, fit).

``--refine-trace N``: the default fit's refinement instead of the spectral fit alone: ``N`` Gibbs sweeps
from the spectral start, the topics' matched L1 against the truth for the spectral topics, for the
chain's start (sweep 0) and every 10 sweeps (read off the coordinator's summed counts), and the
seconds they took.

Writes ``benchmarks/results/scale-<shape>[-zipf]_w<workers>[_ooc].json`` (the sweep:
``scale-<shape>_sweep.json``; the refinement: ``scale-<shape>_refine_trace.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from distdp.api import ClusterOptions

HERE = Path(__file__).resolve().parent
OUT, RESULTS = HERE / "out", HERE / "results"
SHAPES = {"s": dict(docs=200_000, d=20_000, k=50, tokens=150),
          "m": dict(docs=1_000_000, d=20_000, k=20, tokens=100),
          "b": dict(docs=1_000_000, d=50_000, k=100, tokens=150),
          "w": dict(docs=3_500_000, d=100_000, k=100, tokens=150)}
ALPHA0, CHUNK = 5.0, 20_000


def zipf_topics(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """k topic rows ~ Dirichlet(0.1·d·f) with Zipf frequencies ``f_j ∝ 1/(j + 10)`` (rows sum to 1)."""
    f = 1.0 / (np.arange(d) + 10.0)
    f /= f.sum()
    return rng.dirichlet(0.1 * d * f, size=k)


def sample_chunk(topics: np.ndarray, alpha: np.ndarray, n: int, tokens: float,
                 rng: np.random.Generator) -> tuple[sp.csr_matrix, np.ndarray]:
    """``n`` LDA documents (CSR counts) and their θ: a topic per token from θ_n, a word per token from its topic."""
    k, d = topics.shape
    theta = rng.dirichlet(alpha, size=n)
    per_topic = rng.multinomial(rng.poisson(tokens, size=n), theta)      # (n, k) tokens of each topic
    doc = np.repeat(np.repeat(np.arange(n), k), per_topic.ravel())
    z = np.repeat(np.tile(np.arange(k), n), per_topic.ravel())
    words = np.empty(len(doc), dtype=np.int64)
    cum_tw = np.cumsum(topics, axis=1)
    order = np.argsort(z, kind="stable")
    bounds = np.searchsorted(z[order], np.arange(k + 1))  # tokens of topic t: order[bounds[t]:bounds[t + 1]]
    for t in range(k):
        idx = order[bounds[t]:bounds[t + 1]]
        words[idx] = np.minimum(np.searchsorted(cum_tw[t], rng.random(len(idx)) * cum_tw[t, -1]), d - 1)
    X = sp.csr_matrix((np.ones(len(doc)), (doc, words)), shape=(n, d))
    X.sum_duplicates()
    return X, theta


def corpus_path(shape: str, topics: str) -> Path:
    return OUT / (f"scale-{shape}" + ("-zipf" if topics == "zipf" else ""))


def ensure_corpus(shape: str, kind: str) -> Path:
    """Write the corpus of ``shape`` with ``kind`` topics once (8 parquet files, truth/topic_word.npy)."""
    from distdp.io.corpus import write_corpus
    from distdp.lda.synthetic import sample_topics

    spec, path = SHAPES[shape], corpus_path(shape, kind)
    if (path / "truth" / "topic_word.npy").is_file():
        return path
    rng = np.random.default_rng(7)
    if kind == "zipf":
        topics, alpha = zipf_topics(spec["d"], spec["k"], rng), np.full(spec["k"], ALPHA0 / spec["k"])
    else:
        topics = sample_topics(spec["k"], spec["d"], rng, 0.1)
        alpha = ALPHA0 * rng.dirichlet(np.full(spec["k"], 10.0))
    t0 = time.perf_counter()
    parts = [sample_chunk(topics, alpha, min(CHUNK, spec["docs"] - a), spec["tokens"], rng)[0]
             for a in range(0, spec["docs"], CHUNK)]
    X = sp.vstack(parts, format="csr")
    del parts
    truth = {"topic_word.npy": topics, "alpha.npy": alpha}
    write_corpus(path, X, n_shards=8, row_group_size=50_000, overwrite=True,
                 extra_files={f"truth/{n}": (lambda p, a=a: (p.parent.mkdir(exist_ok=True), np.save(p, a)))
                              for n, a in truth.items()})
    print(f"wrote {path}: {X.shape[0]:,} docs, {X.nnz:,} nonzeros in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    return path


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (from ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def status_kb(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` field in kB (0 when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")[:80]
    except OSError:
        return "?"


def pss_kb(pid: int) -> int:
    """Proportional set size of a process in kB (``/proc/<pid>/smaps_rollup``; 0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemoryMonitor(threading.Thread):
    """Samples the summed Pss of this process's tree; keeps every process's peak Pss and own peak RSS."""

    def __init__(self, interval: float = 0.2):
        super().__init__(daemon=True)
        self.interval, self.peak_sum, self.stop = interval, 0, threading.Event()
        self.pss, self.hwm, self.names = {}, {}, {}

    def run(self):
        while not self.stop.is_set():
            self.sample()
            time.sleep(self.interval)

    def sample(self):
        total = 0
        for pid in process_tree(os.getpid()):
            pss = pss_kb(pid)
            total += pss
            self.pss[pid] = max(self.pss.get(pid, 0), pss)
            self.hwm[pid] = max(self.hwm.get(pid, 0), status_kb(pid, "VmHWM"))
            self.names.setdefault(pid, process_name(pid))
        self.peak_sum = max(self.peak_sum, total)

    def report(self) -> dict:
        self.sample()
        gib = 1 / 2 ** 20
        procs = sorted(((self.names[p], round(self.pss[p] * gib, 3), round(self.hwm[p] * gib, 3))
                        for p in self.pss), key=lambda x: -x[1])
        return {"peak_pss_sum_gib": round(self.peak_sum * gib, 3),
                "processes (name, peak Pss GiB, peak RSS GiB)": procs[:12]}


def run_read(path: Path, d: int) -> dict:
    """One process reads the whole corpus into CSR."""
    from distdp.io import corpus as cio

    t0 = time.perf_counter()
    X = cio.read_corpus(path, d)
    return {"read_s": time.perf_counter() - t0, "nnz": int(X.nnz), "docs": int(X.shape[0]),
            "csr_gib": (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2 ** 30,
            "value_dtype": str(X.data.dtype), "index_dtype": str(X.indices.dtype)}


def truth_d(path: Path) -> int:
    """The vocabulary size, from the true topics' shape."""
    return np.load(path / "truth" / "topic_word.npy", mmap_mode="r").shape[1]


def run_fit(path: Path, k: int, workers: int, backend: str, split_init: bool = False,
            out_of_core: bool = False) -> dict:
    """The spectral fit on ``workers`` shard actors, with the process tree's memory sampled.

    With ``split_init`` Ray is started first (timed as ``ray_init_s``), so ``wall_s`` is ``fit_lda`` on a
    running instance: actor start, read and fit.
    """
    import distdp
    from distdp.lda import matched_l1

    mon = MemoryMonitor()
    mon.start()
    ray_init = 0.0
    if split_init and backend == "ray":
        from distdp.distributed import ensure_ray

        t0 = time.perf_counter()
        ensure_ray(None)
        ray_init = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = distdp.fit_lda(str(path), k, alpha0=ALPHA0, vocab_size=int(truth_d(path)), seed=0, refine=0,
                           coherence=False, progress=False,
                           cluster=ClusterOptions(backend=backend, workers=workers, out_of_core=out_of_core))
    wall = time.perf_counter() - t0
    mem = mon.report()
    mon.stop.set()
    truth = np.load(path / "truth" / "topic_word.npy")
    info = model.info
    return {"ray_init_s": ray_init, "wall_s": wall, "timings_s": info.get("timings_s"),
            "whitening": info.get("whitening"), "resources": info.get("resources"),
            "backend": info["parameters"]["backend"], "l1": matched_l1(model.topic_word, truth)[0], "memory": mem}


def refine_trace(path: Path, k: int, workers: int, backend: str, sweeps: int, every: int = 10) -> dict:
    """The spectral fit and ``sweeps`` Gibbs sweeps from it; matched L1 to the truth every ``every`` sweeps.

    The topics at each checkpoint are the posterior-mean topics of the coordinator's summed counts
    (what the fit would return had it stopped there), observed by wrapping
    ``distdp.lda.gibbs.add_counts``, which the coordinator calls once per sweep (and once for the
    chain's start, every token's topic drawn once from the spectral topics: sweep 0); the observation
    copies the counts only at the checkpoints. The spectral topics themselves are observed as
    ``pipeline.refine_gibbs`` receives them.
    """
    import distdp
    from distdp.lda import gibbs, matched_l1, pipeline

    truth = np.load(path / "truth" / "topic_word.npy")
    add, seen = gibbs.add_counts, []
    refine, spectral = pipeline.refine_gibbs, []

    def observed_refine(backend, topic_word, *args, **kwargs):
        spectral.append(np.array(topic_word))
        return refine(backend, topic_word, *args, **kwargs)

    def observed(parts):
        total = add(parts)
        checkpoint = len(seen) % every == 0
        seen.append((time.perf_counter(), gibbs.topics_from_counts(total, pipeline.GIBBS_ETA) if checkpoint else None))
        return total

    gibbs.add_counts, pipeline.refine_gibbs = observed, observed_refine
    try:
        model = distdp.fit_lda(str(path), k, alpha0=ALPHA0, vocab_size=int(truth_d(path)), seed=0, refine=sweeps,
                               coherence=False, progress=False, cluster=ClusterOptions(backend=backend, workers=workers))
    finally:
        gibbs.add_counts, pipeline.refine_gibbs = add, refine
    t0 = seen[0][0]
    trace = [{"sweep": i, "l1": float(matched_l1(topics, truth)[0]), "seconds": t - t0}
             for i, (t, topics) in enumerate(seen) if topics is not None]
    info = model.info
    return {"sweeps": sweeps, "spectral_l1": float(matched_l1(spectral[0], truth)[0]), "start_l1": trace[0]["l1"],
            "final_l1": float(matched_l1(model.topic_word, truth)[0]),
            "trace": trace, "timings_s": info.get("timings_s"), "backend": info["parameters"]["backend"]}


def spawn(mode: str, a, workers: int | None = None, split_init: bool = False) -> dict:
    """Run ``--run mode`` in a fresh process; its JSON result, with the process's own wall time added."""
    cmd = [sys.executable, __file__, "--run", mode, "--shape", a.shape, "--workers", str(workers or a.workers),
           "--backend", a.backend, "--topics", a.topics] + (["--split-init"] if split_init else []) + \
        (["--out-of-core"] if a.out_of_core else [])
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_s": time.perf_counter() - t0}


def machine() -> str:
    """CPU count and model, from the OS."""
    model = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} CPUs ({model})"


def sweep(a) -> None:
    """The worker sweep: each worker count fitted in fresh processes, rounds alternating the order.

    End to end is Ray's start plus ``fit_lda`` (actor start, parquet read, fit); the process's own
    imports are reported apart (``process_s``). Stops starting fits after ``--deadline`` seconds and
    rewrites the result file after every fit, so a cut-off run keeps what it measured.
    """
    counts = [int(w) for w in a.sweep.split(",")]
    t_start = time.perf_counter()
    read = spawn("read", a)
    runs: dict[int, list] = {w: [] for w in counts}
    summary: dict = {}
    out = Path(a.results) / f"{corpus_path(a.shape, a.topics).name}_sweep.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    for r in range(a.repeats):
        for w in (counts if r % 2 == 0 else counts[::-1]):
            if time.perf_counter() - t_start > a.deadline:
                break
            fit = spawn("fit", a, workers=w, split_init=True)
            t = fit["timings_s"] or {}
            fit["end_to_end_s"] = fit["ray_init_s"] + fit["wall_s"]
            fit["compute_s"] = t.get("total", fit["wall_s"]) - t.get("read", 0.0)
            rounds = (fit["resources"] or {}).get("round_s", {}).values()
            fit["slowest_shard_s"] = sum(r["slowest_shard_s"] for r in rounds)
            fit["round_overhead_s"] = sum(r["wall_s"] - r["slowest_shard_s"] for r in rounds)
            runs[w].append(fit)
            print(f"W={w:2d} round {r}: end to end {fit['end_to_end_s']:.1f} s (Ray start {fit['ray_init_s']:.1f}, "
                  f"actors start + read {t.get('read', 0):.1f}, fit {fit['compute_s']:.1f}: slowest shards "
                  f"{fit['slowest_shard_s']:.1f} + rounds' overhead {fit['round_overhead_s']:.1f}), "
                  f"L1 {fit['l1']:.3f}, peak {fit['memory']['peak_pss_sum_gib']:.2f} GiB", flush=True)
            for n, rs in runs.items():
                if rs:
                    keys = ("end_to_end_s", "compute_s", "ray_init_s", "slowest_shard_s", "round_overhead_s")
                    med = {key: float(np.median([x[key] for x in rs])) for key in keys}
                    med["read_s"] = float(np.median([x["timings_s"]["read"] for x in rs]))
                    summary[n] = {**med, "runs": len(rs)}
            if counts[0] in summary:
                for n in summary:
                    summary[n]["speedup_end_to_end"] = summary[counts[0]]["end_to_end_s"] / summary[n]["end_to_end_s"]
                    summary[n]["speedup_fit"] = summary[counts[0]]["compute_s"] / summary[n]["compute_s"]
            out.write_text(json.dumps({"shape": {**SHAPES[a.shape], "alpha0": ALPHA0, "topics": a.topics},
                                       "machine": machine(), "read": read, "summary": summary, "runs": runs},
                                      indent=1, default=str))
    print(json.dumps({"read_s": read["read_s"], "summary": summary}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="s")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", choices=["ray", "local"], default="ray")
    ap.add_argument("--topics", choices=["dirichlet", "zipf"], default="dirichlet")
    ap.add_argument("--sweep", help="worker counts to sweep, e.g. 1,2,4,8,16 (each fitted in fresh processes)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of the sweep (medians reported)")
    ap.add_argument("--deadline", type=float, default=float("inf"), help="seconds after which the sweep starts no fit")
    ap.add_argument("--results", default=str(RESULTS), help="folder for the result file")
    ap.add_argument("--out-of-core", action="store_true",
                    help="actors re-read their row groups every pass instead of holding them")
    ap.add_argument("--refine-trace", type=int, metavar="N",
                    help="N Gibbs sweeps after the spectral fit; L1 to the truth every 10 sweeps")
    ap.add_argument("--run", choices=["read", "fit"], help=argparse.SUPPRESS)
    ap.add_argument("--split-init", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    path = ensure_corpus(a.shape, a.topics)
    if a.sweep and not a.run:
        sweep(a)
        return
    if a.refine_trace:
        result = {"shape": {**SHAPES[a.shape], "alpha0": ALPHA0, "topics": a.topics}, "workers": a.workers,
                  "machine": machine(), **refine_trace(path, SHAPES[a.shape]["k"], a.workers, a.backend,
                                                        a.refine_trace)}
        out = Path(a.results) / f"{corpus_path(a.shape, a.topics).name}_refine_trace.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps({k: result[k] for k in ("spectral_l1", "start_l1", "final_l1", "timings_s")}, default=str))
        return
    if a.run == "read":
        print(json.dumps(run_read(path, SHAPES[a.shape]["d"])))
        return
    if a.run == "fit":
        print(json.dumps(run_fit(path, SHAPES[a.shape]["k"], a.workers, a.backend, a.split_init, a.out_of_core),
                         default=str))
        return
    read = spawn("read", a)
    fit = spawn("fit", a)
    t = fit["timings_s"] or {}
    compute = t.get("total", fit["wall_s"]) - t.get("read", 0.0)
    result = {"shape": {**SHAPES[a.shape], "alpha0": ALPHA0, "topics": a.topics}, "workers": a.workers, "machine":
              machine(), "read": read, "fit": fit,
              "ratios": {"fit_over_read": compute / read["read_s"],
                         "peak_over_csr": fit["memory"]["peak_pss_sum_gib"] / read["csr_gib"]}}
    results = Path(a.results)
    results.mkdir(exist_ok=True)
    name = f"{corpus_path(a.shape, a.topics).name}_w{a.workers}{'_ooc' if a.out_of_core else ''}.json"
    (results / name).write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({"read_s": read["read_s"], "csr_gib": read["csr_gib"], "fit_compute_s": compute,
                      "timings": t, "l1": fit["l1"], "memory": fit["memory"], "ratios": result["ratios"]}, indent=1))


if __name__ == "__main__":
    main()
