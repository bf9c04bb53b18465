"""Saving and loading parameter pytrees (``brax.io.model`` counterpart)."""

from __future__ import annotations

import os
import pickle
import tempfile
from typing import Any

import jax
import numpy as np


def save_params(path: str | os.PathLike, params: Any) -> None:
    """Saves a pytree of arrays to ``path`` atomically (host numpy arrays, pickled)."""
    pickle_atomically(path, jax.tree.map(np.asarray, params), prefix=".params-")


def pickle_atomically(path: str | os.PathLike, value: Any, prefix: str = ".tmp-") -> None:
    """Pickles ``value`` to ``path``: written beside it under ``prefix`` and renamed, so a reader never sees half a
    file; makes the folder if needed."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix)
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_params(path: str | os.PathLike) -> Any:
    """Loads a pytree saved by ``save_params``, naming the path when it is missing or unreadable."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no parameter file at {path}")
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as e:
        raise ValueError(f"parameter file {path} is corrupt or not written by save_params: {e}") from e
