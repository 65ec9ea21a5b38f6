"""Java's String.hashCode and the iteration order of Java's hash maps.

A Java broker writes several admin bodies straight from a ``HashMap`` or a
``ConcurrentHashMap`` keyed by strings (the consumer groups of
GET_BROKER_CONSUME_STATS, the producer groups of GET_ALL_PRODUCER_INFO),
and mqadmin prints them in that order. Both maps iterate bucket by bucket,
the bucket being the spread hash masked by the table size; keys of one
bucket come in insertion order. :func:`hash_order` reproduces that, so the
stub lists what Java lists in the order Java lists it.
"""

from __future__ import annotations

from collections.abc import Iterable


def java_string_hash(text: str) -> int:
    """String.hashCode (UTF-16 code units, 32-bit signed): also SubscriptionData's codeSet."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def table_size(count: int, initial: int = 16) -> int:
    """The table size of a map created with ``initial`` buckets after ``count`` insertions (it doubles
    past three quarters full; ``ConcurrentHashMap(n)`` starts at the power of two above 1.5 n + 1)."""
    size = initial
    while count > size * 3 // 4:
        size *= 2
    return size


def concurrent_table_size(initial_capacity: int) -> int:
    """``new ConcurrentHashMap<>(n)``'s first table: tableSizeFor(n + n/2 + 1)."""
    size = 1
    while size < initial_capacity + (initial_capacity >> 1) + 1:
        size *= 2
    return size


def hash_order(keys: Iterable[str], size: int) -> list[str]:
    """``keys`` (in insertion order) as a Java hash map of ``size`` buckets iterates them."""

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (size - 1)

    return sorted(keys, key=bucket)  # stable: one bucket's keys stay in insertion order


__all__ = ["concurrent_table_size", "hash_order", "java_string_hash", "table_size"]
