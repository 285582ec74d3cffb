"""Which partition a record goes to: Java's default partitioner.

Keyed records go to ``(murmur2(key) & 0x7fffffff) % num_partitions`` over all
partitions, exactly as the Java client, franz-go and kafka-python pick them (so
records with the same key land together whoever produced them). Records
without a key stick to one partition until a batch for it is full, then move
to another (KIP-480's sticky partitioning), which keeps batches large.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._backend import backend

__all__ = ["murmur2", "partition_for_key", "partitions_for_keys", "StickyPartitioner"]


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 hash (Java ``Utils.murmur2``) of ``data``, a signed int32."""
    return int(backend.murmur2(data))


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's producer picks for ``key`` among ``num_partitions``."""
    return (backend.murmur2(key) & 0x7FFFFFFF) % num_partitions


def partitions_for_keys(keys: Any, num_partitions: int) -> np.ndarray:
    """Vectorised :func:`partition_for_key` over an Arrow binary/string column
    (-1 where the key is null), computed in Cython without the GIL."""
    from ..records import _binary_input  # the encoder's view of Arrow binary columns

    n = len(keys)
    return backend.murmur2_partitions(n, _binary_input(keys, n, "key"), num_partitions)


class StickyPartitioner:
    """Java's default partitioner: murmur2 for keys, sticky for null keys.

    ``partition()`` picks; the producer calls ``new_batch(topic)`` when the
    sticky partition's batch filled up, to move on to another partition.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        #: topic -> its current partition for null keys
        self.sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int],
                  available: Sequence[int] | None = None) -> int:
        """The partition of a record of ``topic`` with ``key``.

        ``partitions`` are all of the topic's partitions (keys hash over all of
        them, as in Java); ``available`` those with a leader now (null keys
        only go there when there are any).
        """
        if key is not None:
            return partitions[partition_for_key(key, len(partitions))]
        current = self.sticky.get(topic)
        if current is None:
            current = self._pick(topic, partitions, available, None)
        return current

    def new_batch(self, topic: str, partitions: Sequence[int],
                  available: Sequence[int] | None = None) -> None:
        """The sticky partition's batch is full: switch to another partition."""
        self._pick(topic, partitions, available, self.sticky.get(topic))

    def _pick(self, topic: str, partitions: Sequence[int], available: Sequence[int] | None,
              previous: int | None) -> int:
        pool = list(available or partitions)
        if previous is not None and len(pool) > 1 and previous in pool:
            pool.remove(previous)
        choice = self._rng.choice(pool)
        self.sticky[topic] = choice
        return choice
