"""Array specs (``brax.training.acme.specs`` counterpart): a shape and a dtype, what ``running_statistics.init_state``
builds its statistics from."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Array:
    """The shape and dtype of an array, without its values."""

    shape: tuple[int, ...]
    dtype: Any
