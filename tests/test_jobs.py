"""Ray jobs as a user submits them (README, *On a Ray cluster*; docs/clusters.md), and ``cluster.yaml``.

A head started with ``ray start --head`` (dashboard on, token authentication where the installed Ray has
it) runs ``jobs/fit_lda.py`` and ``jobs/decompose.py`` submitted with ``ray job submit`` and with
``JobSubmissionClient``, the repository as ``--working-dir``. The head lives in its own process group, temp
dir and free ports, so that it meets neither the session's in-process Ray (tests/conftest.py) nor any other
Ray on the machine; it is stopped by signalling that group, never by ``ray stop`` (which stops every Ray
of the user).
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

# Every test here is slow (a real `ray start --head` and jobs through it): `make test-fast` leaves them out.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))  # the Ray CLI of this environment
# What the job needs is distdp/ and jobs/; Ray also leaves out .git, .venv and what .gitignore lists.
EXCLUDES = [".git", ".venv", ".ci", ".hypothesis", ".pytest_cache", "benchmarks", "tests", "out", "data",
            "build", "*.egg-info"]
RUNTIME_ENV = {"excludes": EXCLUDES, "env_vars": {"TQDM_DISABLE": "1"}}
# Ray 2.52+ authenticates dashboard and gRPC calls with a token (RAY_AUTH_MODE=token); older Rays have no tokens.
TOKEN_AUTH = find_spec("ray._private.authentication") is not None
K, D = 3, 40
JOB_TIMEOUT_S = 120


# ----------------------------------------------------------------------------------------------------------
# cluster.yaml against Ray's cluster-launcher schema
# ----------------------------------------------------------------------------------------------------------

def _launcher_config(config: dict) -> dict:
    """What ``ray up`` checks before it creates a node: defaults of the provider filled in, then the schema.

    Ray exposes no public validation function: ``prepare_config`` and ``validate_config`` are the private
    ones ``ray up`` calls (``ray.autoscaler._private.commands._bootstrap_config``), ray-schema.json plus the
    cross-field checks (head type among the node types, min_workers ≤ max_workers). Nothing is contacted.
    """
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def _cluster_yaml() -> dict:
    import yaml

    return yaml.safe_load((REPO / "cluster.yaml").read_text())


def test_cluster_yaml_is_a_valid_ray_cluster_config():
    cfg = _launcher_config(_cluster_yaml())
    assert cfg["head_node_type"] == "head" and cfg["available_node_types"]["head"]["resources"] == {"CPU": 0}
    # the nodes get the job CLI's dependencies (dashboard, job server)
    assert any("ray[default]" in c for c in cfg["setup_commands"])


@pytest.mark.parametrize("typo", ["head_start_ray_command", "min_worker"])
def test_cluster_config_check_catches_a_typo(typo):
    """The check above is not vacuous: a misspelt key is refused, as ``ray up`` would refuse it."""
    import jsonschema

    cfg = _cluster_yaml()
    if typo == "head_start_ray_command":
        cfg[typo] = cfg.pop("head_start_ray_commands")
    else:
        cfg["available_node_types"]["worker"][typo] = cfg["available_node_types"]["worker"].pop("min_workers")
    with pytest.raises(jsonschema.ValidationError, match=typo):
        _launcher_config(cfg)


# ----------------------------------------------------------------------------------------------------------
# a head node of our own
# ----------------------------------------------------------------------------------------------------------

@dataclass
class Head:
    address: str        # the dashboard's HTTP address, as given to `ray job submit --address`
    env: dict           # environment of the head and of the CLI calls (RAY_AUTH_MODE, RAY_AUTH_TOKEN_PATH)
    headers: dict       # HTTP headers of the SDK client (the bearer token)
    base: Path


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports free now (all held open at once, so no two are the same)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               RAY_USAGE_STATS_ENABLED="0", TQDM_DISABLE="1", **extra)
    return env


def _http_status(url: str, headers: dict | None = None) -> int | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state, process group) of ``pid`` from /proc, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], int(fields[2])


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        st = _proc_state(int(d.name))
        if st is not None and st[1] == pgid and st[0] != "Z":
            out.append(int(d.name))
    return out


def _pids_mentioning(marker: bytes) -> list[int]:
    """Live processes of ours whose command line or environment names ``marker`` (the head's temp dir)."""
    pids = []
    for d in Path("/proc").glob("[0-9]*"):
        pid = int(d.name)
        if pid == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if ((marker in (d / "cmdline").read_bytes() or marker in (d / "environ").read_bytes())
                    and (_proc_state(pid) or ("Z",))[0] != "Z"):
                pids.append(pid)
    return pids


def _wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _stop_head(proc: subprocess.Popen, base: Path) -> list[int]:
    """Stop the head without `ray stop`: SIGTERM to its process group (every Ray process of the head: GCS,
    raylet, dashboard, workers), SIGKILL to what is left after 3 s, and SIGKILL to the job drivers, which
    Ray starts in sessions of their own, found by the temp dir in their environment. Returns what survived."""
    pgid, marker = proc.pid, str(base).encode()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    _wait_until(lambda: not _group_members(pgid), 3)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    for pid in _pids_mentioning(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _wait_until(lambda: not _group_members(pgid) and not _pids_mentioning(marker), 10)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    return sorted(set(_group_members(pgid)) | set(_pids_mentioning(marker)))


@pytest.fixture(scope="module")
def head():
    """``ray start --head --block`` on free ports in a temp dir of its own, with a token of its own."""
    pytest.importorskip("ray")
    if not sys.platform.startswith("linux"):
        pytest.skip("the test's head is stopped and checked through /proc")
    missing = [m for m in ("aiohttp", "aiohttp_cors", "opencensus") if find_spec(m) is None]
    assert not missing, f"ray[default] is not installed (missing {missing}); the job CLI and SDK need it"
    base = Path(tempfile.mkdtemp(prefix="distdp-ray-"))  # short: Ray's unix sockets live under it
    proc = log = None
    try:
        env, headers = _clean_env(), {}
        if TOKEN_AUTH:
            # `ray get-auth-token --generate` writes ~/.ray/auth_token: with HOME pointed here, not the user's.
            gen = subprocess.run([RAY, "get-auth-token", "--generate"], env=_clean_env(HOME=str(base / "home")),
                                 capture_output=True, text=True, timeout=60)
            assert gen.returncode == 0, gen.stderr
            token_file = base / "home" / ".ray" / "auth_token"
            token = token_file.read_text().strip()
            assert token and gen.stdout.strip() == token
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_file))
            headers = {"Authorization": f"Bearer {token}"}
        names = ["port", "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                 "runtime-env-agent-port", "metrics-export-port", "ray-client-server-port", "node-manager-port",
                 "object-manager-port"]
        ports = dict(zip(names, _free_ports(len(names))))
        cmd = [RAY, "start", "--head", "--block", "--num-cpus", "2", "--include-dashboard", "true",
               "--dashboard-host", "127.0.0.1", "--temp-dir", str(base / "ray"), "--disable-usage-stats",
               "--min-worker-port", "0", "--max-worker-port", "0",  # workers on ports the OS picks
               *[a for name, port in ports.items() for a in (f"--{name}", str(port))]]
        log = open(base / "head.log", "wb")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # its own process group: stopped without `ray stop`
        address = f"http://127.0.0.1:{ports['dashboard-port']}"
        deadline = time.monotonic() + 90
        while _http_status(f"{address}/api/version", headers) != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the Ray head did not come up:\n" + (base / "head.log").read_text()[-3000:])
            time.sleep(0.5)
        yield Head(address, env, headers, base)
    finally:
        left = _stop_head(proc, base) if proc is not None else []
        if log is not None:
            log.close()
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"Ray processes of the test's head survived: {left}"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A small LDA corpus, the same corpus with a vocabulary too short for its word ids, and points."""
    from distdp.io.corpus import write_corpus
    from distdp.lda.synthetic import sample_corpus
    from distdp.tensor.files import write_points
    from distdp.tensor.synthetic import SkewedMixture

    root = tmp_path_factory.mktemp("jobs")
    rng = np.random.default_rng(0)
    c = sample_corpus(800, D, K, rng, alpha0=1.0, doc_length=60)
    write_corpus(root / "corpus", c.counts, n_shards=2, vocab=[f"w{i}" for i in range(D)], row_group_size=200)
    write_corpus(root / "bad", c.counts, n_shards=2, vocab=[f"w{i}" for i in range(D)], row_group_size=200)
    (root / "bad" / "vocab.txt").write_text("".join(f"w{i}\n" for i in range(D - 5)))
    V = np.linalg.qr(rng.standard_normal((6, 2)))[0]
    write_points(root / "points.parquet", SkewedMixture(V, np.array([0.6, 0.4]), 0.1).sample(20000, rng))
    return root, V


def _job(kind, root):
    """Entrypoint arguments and output directory of a job (absolute paths: a job runs in a copy of the working
    directory, on the head node)."""
    out = root / f"out-{kind}-{time.monotonic_ns()}"
    if kind == "fit_lda":
        args = ["jobs/fit_lda.py", str(root / "corpus"), "--k", str(K), "--workers", "2", "--seed", "0",
                "--no-progress", "--out", str(out)]
    else:
        args = ["jobs/decompose.py", str(root / "points.parquet"), "--k", "2", "--backend", "ray", "--workers",
                "2", "--iters", "8", "--seed", "0", "--out", str(out)]
    return args, out


def _check_output(kind, out, V):
    if kind == "fit_lda":
        tw = np.load(out / "topic_word.npy")
        assert tw.shape == (K, D) and np.allclose(tw.sum(axis=1), 1)
        assert np.load(out / "alpha.npy").shape == (K,)
        info = json.loads((out / "model.json").read_text())
        assert info["n_topics"] == K and info["parameters"]["workers"] == 2
        assert info["parameters"]["backend"] == "ray"  # the job attached to the cluster (RAY_ADDRESS)
        assert (out / "vocab.txt").read_text().split() == [f"w{i}" for i in range(D)]
    else:
        vec = np.load(out / "eigenvectors.npy")
        assert vec.shape == (6, 2) and np.load(out / "eigenvalues.npy").shape == (2,)
        assert np.min(np.max(np.abs(V.T @ vec), axis=1)) > 0.95
        assert json.loads((out / "report.json").read_text())["parameters"]["backend"] == "ray"


def _client(head):
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(head.address, headers=head.headers)


def _wait(client, job_id):
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not (status := client.get_job_status(job_id)).is_terminal():
        assert time.monotonic() < deadline, f"job {job_id} still {status} after {JOB_TIMEOUT_S}s"
        time.sleep(0.5)
    return status, client.get_job_logs(job_id)


@pytest.mark.slow
def test_token_is_required(head):
    """Token auth is on: the job API refuses a request without the token."""
    if not TOKEN_AUTH:
        pytest.skip("this Ray has no token authentication")
    assert _http_status(f"{head.address}/api/jobs/") == 401
    assert _http_status(f"{head.address}/api/jobs/", head.headers) == 200
    # The job CLI sends the token only with RAY_AUTH_MODE=token in its own environment (the symptom).
    env = {k: v for k, v in head.env.items() if k != "RAY_AUTH_MODE"}
    r = subprocess.run([RAY, "job", "list", "--address", head.address], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "Missing authentication token" in r.stdout + r.stderr
    r = subprocess.run([RAY, "job", "list", "--address", head.address], env=head.env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fit_lda", "decompose"])
def test_job_cli(head, inputs, kind):
    """``ray job submit --working-dir .`` (README), waiting for the job and streaming its logs."""
    root, V = inputs
    args, out = _job(kind, root)
    sid = f"cli-{kind}-{time.monotonic_ns()}"
    r = subprocess.run([RAY, "job", "submit", "--address", head.address, "--submission-id", sid,
                        "--working-dir", ".", "--runtime-env-json", json.dumps(RUNTIME_ENV), "--", "python", *args],
                       cwd=REPO, env=head.env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"Job '{sid}' succeeded" in r.stdout + r.stderr
    assert f"wrote {out}" in r.stdout + r.stderr  # the job's own output, streamed back
    _check_output(kind, out, V)
    st = subprocess.run([RAY, "job", "status", "--address", head.address, sid], env=head.env,
                        capture_output=True, text=True, timeout=60)
    assert st.returncode == 0 and "succeeded" in (st.stdout + st.stderr).lower()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fit_lda", "decompose"])
def test_job_sdk(head, inputs, kind):
    """``JobSubmissionClient.submit_job`` with the repository as ``working_dir`` in the runtime_env."""
    from ray.job_submission import JobStatus

    root, V = inputs
    args, out = _job(kind, root)
    client = _client(head)
    job_id = client.submit_job(entrypoint=shlex.join(["python", *args]),
                               runtime_env={"working_dir": str(REPO), **RUNTIME_ENV})
    status, logs = _wait(client, job_id)
    assert status == JobStatus.SUCCEEDED, logs[-3000:]
    _check_output(kind, out, V)


@pytest.mark.slow
def test_job_with_bad_input_fails_cleanly(head, inputs):
    """A corpus whose word ids exceed its vocabulary: the job FAILS (exit code 2), distdp's one-line error is in
    its logs, and ``--out`` is left as it was (no directory, no temporary sibling)."""
    from ray.job_submission import JobStatus

    root, _ = inputs
    out = root / "out-bad"
    client = _client(head)
    job_id = client.submit_job(entrypoint=shlex.join(["python", "jobs/fit_lda.py", str(root / "bad"), "--k", str(K),
                                                      "--workers", "2", "--no-progress", "--out", str(out)]),
                               runtime_env={"working_dir": str(REPO), **RUNTIME_ENV})
    status, logs = _wait(client, job_id)
    assert status == JobStatus.FAILED
    line = (rf"^distdp fit-lda: error: {re.escape(str(root / 'bad'))}/part-0000[01]\.parquet: row \d+: "
            rf"column 'word_ids': id \d+ is outside the vocabulary \[0, {D - 5}\)$")
    assert re.search(line, logs, re.M), logs[-3000:]
    assert not out.exists() and not list(root.glob(".out-bad.*"))
    assert "exit code 2" in client.get_job_info(job_id).message


@pytest.mark.slow
def test_job_with_relative_out_is_refused(head, inputs):
    """A relative ``--out`` would be written into the job's unpacked working_dir, which Ray deletes: refused."""
    from ray.job_submission import JobStatus

    root, _ = inputs
    client = _client(head)
    job_id = client.submit_job(entrypoint=shlex.join(["python", "jobs/decompose.py", str(root / "points.parquet"),
                                                      "--k", "2", "--out", "model"]),
                               runtime_env={"working_dir": str(REPO), **RUNTIME_ENV})
    status, logs = _wait(client, job_id)
    assert status == JobStatus.FAILED
    assert "distdp decompose: error: --out 'model' is a relative path" in logs


def test_relative_out_is_refused_in_a_job(tmp_path):
    """In a Ray job the working directory is a copy that Ray deletes: a relative ``--out`` would be lost,
    so distdp refuses it, the job entrypoints included (before any work; no Ray needed to check)."""
    env = _clean_env(RAY_JOB_CONFIG_JSON_ENV_VAR="{}")
    for script, cmd in (("fit_lda.py", "fit-lda"), ("decompose.py", "decompose"), ("complete.py", "complete")):
        r = subprocess.run([sys.executable, str(REPO / "jobs" / script), "missing-input", "--k", "2",
                            "--out", "model"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert f"distdp {cmd}: error: --out 'model' is a relative path" in r.stderr
    assert not list(tmp_path.iterdir())
