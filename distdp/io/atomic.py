"""Atomic output directories: a failed or interrupted job leaves nothing half-written."""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path


@contextlib.contextmanager
def atomic_directory(path: str | Path, overwrite: bool = False):
    """Yield a temporary sibling directory that replaces ``path`` only on success.

    The files are written into ``.<name>.tmp-<id>`` beside ``path`` and the
    directory is renamed into place when the block exits normally; on an
    exception the temporary directory is removed and ``path`` is untouched.
    A replaced ``path`` (directory, or file) is moved aside and deleted once
    the new one is in place, so no backup is left behind; if the final
    rename fails, it is put back.

    Parameters
    ----------
    path : str or Path
        Final directory.
    overwrite : bool
        Replace an existing non-empty ``path``; otherwise refuse it.

    Raises
    ------
    FileExistsError
        ``path`` exists, is not empty, and ``overwrite`` is false.
    """
    path = check_output_dir(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        _fsync_dir(tmp)
        if os.path.lexists(path):
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def check_output_dir(path: str | Path, overwrite: bool = False) -> Path:
    """Fail early (before any work) if ``path`` exists, is not empty, and may not be replaced."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not overwrite:
        raise FileExistsError(f"{path} already exists and is not empty (pass overwrite=True / --overwrite)")
    return path


def _fsync_dir(directory: Path) -> None:
    """Flush the files of ``directory`` to disk before it is renamed into place."""
    for f in directory.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
