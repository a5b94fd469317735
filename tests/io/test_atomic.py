"""Atomic output directories (distdp.io.atomic): nothing left on failure, stale siblings cleaned, SIGKILL-safe."""

import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from distdp.io.atomic import atomic_directory, recover_stale


def test_atomic_directory_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as tmp:
            (tmp / "half.npy").write_text("x")
            raise RuntimeError("interrupted")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with atomic_directory(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(FileExistsError):
        with atomic_directory(target):
            pass
    with pytest.raises(RuntimeError):  # a failed overwrite keeps the old output
        with atomic_directory(target, overwrite=True) as tmp:
            raise RuntimeError
    assert (target / "a").read_text() == "1"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_siblings_of_killed_writers_are_cleaned_up(tmp_path):
    host, dead, live = socket.gethostname(), _dead_pid(), os.getpid()
    target = tmp_path / "out"
    names = {"stale_tmp": f".out.tmp-{host}-{dead}-0123abcd", "live_tmp": f".out.tmp-{host}-{live}-0123abcd",
             "other_host": f".out.tmp-elsewhere-{dead}-0123abcd", "unowned": ".out.tmp-0123abcd",
             "other_name": f".output.tmp-{host}-{dead}-0123abcd", "stale_old": f".out.old-{host}-{dead}-4567cdef"}
    for name in names.values():
        (tmp_path / name).mkdir()
    (tmp_path / names["stale_old"] / "model.json").write_text("previous")
    # out is missing: the previous output moved aside by a killed overwrite is put back, the half-written
    # temporary deleted; what belongs to a live process, another host, or no known owner stays.
    done = recover_stale(target)
    assert sorted(p.name for p in done) == sorted([names["stale_old"], names["stale_tmp"]])
    assert (target / "model.json").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out"] + [names[k] for k in ("live_tmp", "other_host", "unowned", "other_name")])
    # With out in place, a stale .old is an output already replaced: deleted.
    (tmp_path / names["stale_old"]).mkdir()
    assert recover_stale(target) == [tmp_path / names["stale_old"]] and (target / "model.json").exists()


def test_sigkilled_writer_leaves_nothing_behind_the_next_run(tmp_path):
    # A writer killed with SIGKILL (no cleanup runs) inside the atomic block: the next run on the same
    # path removes its temporary directory before writing.
    script = textwrap.dedent(f"""
        import sys, time
        from distdp.io.atomic import atomic_directory
        with atomic_directory({str(tmp_path / "out")!r}) as tmp:
            (tmp / "half.npy").write_text("x")
            print("ready", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (left,) = [p.name for p in tmp_path.iterdir()]
    assert left.startswith(".out.tmp-") and not (tmp_path / "out").exists()
    with atomic_directory(tmp_path / "out") as tmp:
        (tmp / "a").write_text("1")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_directory_refuses_a_file_and_replaces_a_directory_without_backup(tmp_path):
    """distdp.io.atomic (shared by every command) never replaces a user's file with an output directory,
    even with overwrite, and replacing a directory leaves no hidden '.name.old-XXXX' copy."""
    (tmp_path / "f").write_text("old")
    with pytest.raises(FileExistsError, match="not a directory"):
        with atomic_directory(tmp_path / "f", overwrite=True):
            pass
    assert (tmp_path / "f").read_text() == "old"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("old")
    with atomic_directory(tmp_path / "d", overwrite=True) as tmp:
        (tmp / "a").write_text("new")
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"]
