"""A progress bar over a fit's passes and iterations (tqdm); imports nothing else of distdp."""
from __future__ import annotations

from typing import Callable


def progress_bar(enabled: bool) -> tuple[Callable | None, Callable[[], None]]:
    """A tqdm bar over passes and power/EM iterations, and its closer.

    Parameters
    ----------
    enabled : bool
        False gives no bar: ``(None, a no-op closer)``.

    Returns
    -------
    update : callable or None
        ``update(stage, done, total)``, the ``progress`` callback of the coordinators.
    close : callable
        Closes the bar.
    """
    if not enabled:
        return None, lambda: None
    from tqdm.auto import tqdm

    bar = tqdm(desc="fit", unit="pass", leave=False, disable=None)  # None: off when not a terminal

    def update(stage, done, total):
        bar.set_description(stage)
        bar.update(1)

    return update, bar.close
