"""Atomic output directories: a failed or interrupted job leaves nothing half-written."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import uuid
from pathlib import Path


@contextlib.contextmanager
def atomic_directory(path: str | Path, overwrite: bool = False):
    """Yield a temporary sibling directory that replaces ``path`` only on success.

    The files are written into ``.<name>.tmp-<host>-<pid>-<id>`` beside
    ``path`` and the directory is renamed into place when the block exits
    normally; on an exception the temporary directory is removed and ``path``
    is untouched. A replaced directory is moved aside (``.<name>.old-…``) and
    deleted once the new one is in place, so no backup is left behind; if the
    final rename fails, it is put back. An existing file is never replaced
    (:func:`check_output_dir`). What a killed process (SIGKILL, a lost node)
    left beside ``path`` is dealt with first (:func:`recover_stale`).

    Parameters
    ----------
    path : str or Path
        Final directory.
    overwrite : bool
        Replace an existing non-empty ``path``; otherwise refuse it.

    Raises
    ------
    FileExistsError
        ``path`` is a file, or is a non-empty directory and ``overwrite`` is false.
    """
    recover_stale(path)
    path = check_output_dir(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    tmp.mkdir()
    try:
        yield tmp
        _fsync_dir(tmp)
        if os.path.lexists(path):
            old = _sibling(path, "old")
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)  # put the previous output back
                raise
            _remove(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove(path: Path) -> None:
    """Delete the replaced output, whatever it is (directory, file, or symlink); best effort."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


@contextlib.contextmanager
def atomic_file(path: str | Path):
    """Yield a temporary sibling path that replaces ``path`` only when the block succeeds."""
    path = Path(path)
    recover_stale(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _sibling(path: Path, kind: str) -> Path:
    """``.<name>.<kind>-<host>-<pid>-<id>`` beside ``path``: whose it is, so that a later run can tell it is stale."""
    return path.parent / f".{path.name}.{kind}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_stale(path: str | Path) -> list[Path]:
    """Clean up what processes killed while writing ``path`` left beside it, on this host.

    A sibling ``.<name>.tmp-<host>-<pid>-<id>`` or ``.<name>.old-…`` whose
    host is this one and whose process no longer exists is stale. A stale
    ``.old`` is a previous output that was moved aside in the instant before
    its replacement was renamed into place: when ``path`` is missing it is
    put back (nothing written is lost), otherwise the newer output is in
    place and it is deleted. Stale ``.tmp`` siblings are half-written and
    deleted. Siblings of live processes, of other hosts (a shared file system)
    or without an owner in their name are left alone.

    Returns
    -------
    list of Path
        The siblings removed or restored.
    """
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.") + r"(tmp|old)-" + re.escape(socket.gethostname())
                         + r"-(\d+)-[0-9a-f]{8}$")
    if not path.parent.is_dir():
        return []
    stale = [(m.group(1), p) for p in path.parent.iterdir()
             if (m := pattern.match(p.name)) and not _pid_alive(int(m.group(2)))]
    done = []
    # The newest .old first: when path is missing, it is the last output that was in place.
    for kind, p in sorted(stale, key=lambda kp: (kp[0] != "old", -kp[1].lstat().st_mtime)):
        if kind == "old" and not os.path.lexists(path):
            os.replace(p, path)
        else:
            _remove(p)
        done.append(p)
    return done


def local_output(path: str | Path) -> Path:
    """``path`` as a local ``Path``; a URI (``s3://…``) is refused: outputs are written atomically to a local or
    mounted directory only, and ``Path`` would turn the URI into a local ``s3:/…`` directory."""
    if isinstance(path, str) and "://" in path:
        raise ValueError(f"{path}: outputs go to a local or mounted path, not a URI (write it there and copy "
                         "it to the store, e.g. with the store's own CLI)")
    return Path(path)


def check_output_dir(path: str | Path, overwrite: bool = False) -> Path:
    """Fail early (before any work) if ``path`` may not be replaced by a directory.

    An existing file (or anything not a directory) is always refused, even
    with ``overwrite``: an output directory never replaces a user's file. A
    non-empty directory is refused unless ``overwrite``.

    Raises
    ------
    FileExistsError
    ValueError
        ``path`` is a URI (:func:`local_output`).
    """
    path = local_output(path)
    if os.path.lexists(path) and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a directory; refusing to replace it (even with "
                              "--overwrite)")
    if path.exists() and any(path.iterdir()) and not overwrite:
        raise FileExistsError(f"{path} already exists and is not empty (pass overwrite=True / --overwrite)")
    return path


def _fsync_dir(directory: Path) -> None:
    """Flush the files of ``directory`` to disk before it is renamed into place."""
    for f in directory.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
