"""Turning a numpy matrix into `Embedding`s without a per-float Python loop."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import numpy.typing as npt

from engram.domain.embedding import Embedding


def rows_to_embeddings(model_id: str, matrix: npt.NDArray[Any]) -> list[Embedding]:
    """One `Embedding` per row of a 2-D matrix.

    `ndarray.tolist()` makes a Python float per component (about 20x slower
    for 384-dim rows); an `array('f')` built from the row's native float32
    bytes is the same sequence of floats for `Embedding.from_floats`.
    """
    native = np.ascontiguousarray(matrix, dtype=np.float32)
    return [Embedding.from_floats(model_id, array("f", row.tobytes())) for row in native]
