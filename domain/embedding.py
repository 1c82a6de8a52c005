"""Embedding vectors as a value object.

Vectors are kept as packed little-endian float32 bytes: compact in the event
log (a 1536-dim vector is 6 KiB, not ~30 KiB of JSON floats) and cheap to
decode. Every vector names the model that produced it, so that vectors of
different models or dimensions are never compared or averaged.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engram.domain.errors import EmbeddingMismatch, InvalidInput


def _pack(values: Iterable[float]) -> bytes:
    arr = array("f", values)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tobytes()


def _unpack(data: bytes) -> array[float]:
    arr = array("f")
    arr.frombytes(data)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr


@dataclass(frozen=True, slots=True)
class Embedding:
    model: str
    dim: int
    data: bytes

    def __post_init__(self) -> None:
        if not self.model:
            raise InvalidInput("an embedding must name its model")
        if self.dim <= 0 or len(self.data) != 4 * self.dim:
            raise InvalidInput(
                f"embedding of model {self.model!r} declares {self.dim} dimensions "
                f"but holds {len(self.data) // 4}"
            )

    @classmethod
    def from_floats(cls, model: str, values: Sequence[float]) -> Embedding:
        return cls(model=model, dim=len(values), data=_pack(values))

    def floats(self) -> array[float]:
        return _unpack(self.data)

    def same_space(self, other: Embedding) -> bool:
        return self.model == other.model and self.dim == other.dim

    def require_same_space(self, other: Embedding) -> None:
        if not self.same_space(other):
            raise EmbeddingMismatch(
                f"cannot mix vectors of {self.model}/{self.dim} and {other.model}/{other.dim}",
                left=f"{self.model}/{self.dim}",
                right=f"{other.model}/{other.dim}",
            )

    def cosine(self, other: Embedding) -> float:
        self.require_same_space(other)
        a, b = self.floats(), other.floats()
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(y * y for y in b))
        if na == 0.0 or nb == 0.0:
            return 0.0
        return dot / (na * nb)

    def __repr__(self) -> str:  # the bytes are noise in logs and test output
        return f"Embedding(model={self.model!r}, dim={self.dim})"
