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
    A replaced directory is moved aside and deleted once the new one is in
    place, so no backup is left behind; if the final rename fails, it is put
    back. An existing file is never replaced (:func:`check_output_dir`).

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
    """Fail early (before any work) if ``path`` may not be replaced by a directory.

    An existing file (or anything not a directory) is always refused, even
    with ``overwrite``: an output directory never replaces a user's file. A
    non-empty directory is refused unless ``overwrite``.

    Raises
    ------
    FileExistsError
    """
    path = Path(path)
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
