"""Queue allocation in a consumer group: RocketMQ's ``AllocateMessageQueueAveragely``.

Every consumer of a clustering group computes the same allocation on its
own: it sorts the group's queues (``MessageQueue.compareTo``: topic, then
broker name, then queue id) and the consumer ids it got from a broker
(GET_CONSUMER_LIST_BY_GROUP, sorted as strings), then takes the contiguous
slice that belongs to its own index. No coordination is needed as long as
every member saw the same lists, which is why a rebalance right after a
membership change can briefly give a queue two owners (a member that saw
the new list took it before one that still had the old list released it)
or none.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: (topic, broker name, queue id): a MessageQueue.
MessageQueue = tuple[str, str, int]


def sort_queues(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """``Collections.sort(mqAll)``: by topic, broker name, queue id (tuple order is exactly that)."""
    return sorted(queues)


def allocate_averagely(mq_all: Sequence[MessageQueue], cid_all: Sequence[str], current: str) -> list[MessageQueue]:
    """The queues of ``mq_all`` consumer ``current`` owns among ``cid_all`` (both already sorted).

    A consumer missing from ``cid_all`` (the broker has not seen its
    heartbeat yet) owns nothing, as in Java. With more consumers than
    queues, the first ``len(mq_all)`` consumers own one queue each.
    """
    if current not in cid_all or not mq_all:
        return []
    n_q, n_c = len(mq_all), len(cid_all)
    index = cid_all.index(current)
    mod = n_q % n_c
    if n_q <= n_c:
        average = 1
    elif mod > 0 and index < mod:
        average = n_q // n_c + 1
    else:
        average = n_q // n_c
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_q - start)
    return [mq_all[(start + i) % n_q] for i in range(max(0, count))]


def allocation_of_group(mq_all: Iterable[MessageQueue], cid_all: Iterable[str]) -> dict[str, list[MessageQueue]]:
    """What every member owns once all of them saw the same lists (for reports and checks)."""
    queues = sort_queues(mq_all)
    cids = sorted(cid_all)
    return {cid: allocate_averagely(queues, cids, cid) for cid in cids}


__all__ = ["MessageQueue", "allocate_averagely", "allocation_of_group", "sort_queues"]
