"""A lexical, deterministic embedder for tests and offline smoke runs.

Features are lower-cased word unigrams, word bigrams and character 3-grams of
each word; every feature is hashed into one of `dim` buckets with a sign (the
"hashing trick"), so texts that share words or word pieces get a positive
cosine. It knows nothing of meaning: "car" and "automobile" are unrelated.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from engram.adapters.embedders._errors import EmbedderConfigError
from engram.adapters.embedders._vectors import rows_to_embeddings
from engram.domain.embedding import Embedding

_WORD = re.compile(r"\w+", re.UNICODE)

# Bigrams carry word order and char 3-grams catch inflections ("memory" and
# "memories" share "#me", "mem", "emo", "mor"); they are weighted below whole words so that an exact shared
# word still dominates a shared fragment.
_UNIGRAM_WEIGHT = 1.0
_BIGRAM_WEIGHT = 0.7
_TRIGRAM_WEIGHT = 0.4

# Hashing is the hot path. Texts share most of their words, so the buckets
# of a word (its unigram and its 3-grams) and of a bigram are memoised; the
# bound keeps a long-running process from growing without limit.
_CACHE_LIMIT = 200_000


class HashingEmbedder:
    """Signed feature hashing into `dim` dimensions, L2-normalised.

    Stable across processes and machines (blake2b, not Python's salted
    `hash()`). An empty or all-punctuation text has no features and gets the
    zero vector, whose cosine with anything is 0.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 1:
            raise EmbedderConfigError(f"hashing embedder dimension must be >= 1, got {dim}")
        self._dim = dim
        self._bucket_cache: dict[str, tuple[int, float]] = {}
        self._word_cache: dict[str, tuple[list[int], list[float]]] = {}

    @property
    def model_id(self) -> str:
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return []
        counts: list[int] = []
        buckets: list[int] = []
        weights: list[float] = []
        for text in texts:
            before = len(buckets)
            words = _WORD.findall(text.lower())
            for word in words:
                word_buckets, word_weights = self._word_features(word)
                buckets.extend(word_buckets)
                weights.extend(word_weights)
            for first, second in itertools.pairwise(words):
                bucket, sign = self._bucket(f"b:{first} {second}")
                buckets.append(bucket)
                weights.append(sign * _BIGRAM_WEIGHT)
            counts.append(len(buckets) - before)
        matrix = self._accumulate(counts, buckets, weights)
        return rows_to_embeddings(self.model_id, matrix)

    def _word_features(self, word: str) -> tuple[list[int], list[float]]:
        hit = self._word_cache.get(word)
        if hit is not None:
            return hit
        bucket, sign = self._bucket("w:" + word)
        buckets, weights = [bucket], [sign * _UNIGRAM_WEIGHT]
        # Boundary marks make prefixes and suffixes distinct 3-grams.
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            bucket, sign = self._bucket("c:" + padded[i : i + 3])
            buckets.append(bucket)
            weights.append(sign * _TRIGRAM_WEIGHT)
        if len(self._word_cache) >= _CACHE_LIMIT:
            self._word_cache.clear()
        self._word_cache[word] = (buckets, weights)
        return buckets, weights

    def _bucket(self, feature: str) -> tuple[int, float]:
        # The prefixes given by the callers ("w:", "c:", "b:") keep the three
        # namespaces apart: the word "the" and the 3-gram "the" differ.
        hit = self._bucket_cache.get(feature)
        if hit is not None:
            return hit
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        # The low bits pick the bucket and the top bit the sign, so the two
        # are independent for any dim.
        hit = (value % self._dim, -1.0 if value >> 63 else 1.0)
        if len(self._bucket_cache) >= _CACHE_LIMIT:
            self._bucket_cache.clear()
        self._bucket_cache[feature] = hit
        return hit

    def _accumulate(
        self, counts: list[int], buckets: list[int], weights: list[float]
    ) -> npt.NDArray[np.float64]:
        n = len(counts)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.asarray(counts, dtype=np.int64))
        flat = rows * self._dim + np.asarray(buckets, dtype=np.int64)
        # bincount sums colliding features of a text in one vectorised pass.
        summed = np.bincount(flat, weights=np.asarray(weights, dtype=np.float64), minlength=n * self._dim)
        # bincount of an empty input is integer-typed: texts with no words would break the division below.
        matrix = summed.astype(np.float64).reshape(n, self._dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float64] = np.divide(
            matrix, norms, out=np.zeros_like(matrix), where=norms > 0
        )
        return normalised
