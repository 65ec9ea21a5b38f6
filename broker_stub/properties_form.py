"""The properties string a message is stored with, from the one its producer sent.

Both forms of the client's text are accepted: a 5.x client ends every pair
with ``\\x02``; a 4.9 client drops the last one (4.9's
``messageProperties2String`` deletes it). Java parses both the same way
(``string2messageProperties``), so what matters is the parsed map: the
stored text must parse to the client's pairs plus the broker's additions,
never to a last pair that swallowed them.

The text is edited rather than parsed and re-joined: the common 5.x send
needs only a few substring checks and one concatenation, and pairs Java
would skip (empty name or value) stay in the text where any parser skips
them again.

Single messages (SEND_MESSAGE, SEND_MESSAGE_V2), as Java 5.3's
SendMessageProcessor: ``POP_CK`` removed (clearReservedProperties),
``UNIQ_KEY`` added when missing, ``CLUSTER`` set to the broker's cluster.

Batches (SEND_BATCH_MESSAGE): each message keeps its own pairs; the pairs
of the batch header (``WAIT``, and the batch's own ``UNIQ_KEY`` from a 5.x
client) fill in only what a message lacks, then ``CLUSTER`` is set. Java
5.3.3 appends the header's pairs after each message's, so the batch's
``UNIQ_KEY`` overrode every message's and a consumer saw one id for the
whole batch (apache/rocketmq#9416; later releases append nothing, which
also drops ``CLUSTER``). The stub keeps each message's id and the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker_stub.common import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    delete_property,
    format_properties,
    get_property,
    parse_properties,
)

CLUSTER = "CLUSTER"
UNIQ_KEY = "UNIQ_KEY"
TAGS = "TAGS"
POP_CK = "POP_CK"
_CLUSTER_KEY = CLUSTER + NAME_VALUE_SEPARATOR
_POP_CK_KEY = POP_CK + NAME_VALUE_SEPARATOR


def _pair(name: str, value: str) -> str:
    return f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}"


def _client_pairs(text: str) -> str:
    """The client's text without the pairs the broker sets itself, ending with a separator."""
    if _POP_CK_KEY in text or _CLUSTER_KEY in text:
        text = delete_property(delete_property(text, POP_CK), CLUSTER)
    if text and text[-1] != PROPERTY_SEPARATOR:
        text += PROPERTY_SEPARATOR  # a 4.9 client's last pair
    return text


def cluster_pair(cluster: str) -> str:
    """The ``CLUSTER`` pair a broker of ``cluster`` adds to every message (made once, at start)."""
    return _pair(CLUSTER, cluster)


def single_properties(text: str, cluster: str, new_uniq: Callable[[], str]) -> tuple[str, str]:
    """(stored text, the message's UNIQ_KEY) for one message sent with ``text``; ``cluster``
    is the broker's :func:`cluster_pair`."""
    text = _client_pairs(text)
    uniq = get_property(text, UNIQ_KEY)
    if uniq is None:
        uniq = new_uniq()
        text += _pair(UNIQ_KEY, uniq)
    return text + cluster, uniq


@dataclass(frozen=True, slots=True)
class BatchTail:
    """What a batch header adds to each of its messages."""

    pairs: dict[str, str]  # the header's pairs (without CLUSTER and POP_CK)
    uniq_key: str | None  # the batch's own UNIQ_KEY: the answer's transactionId, as Java's


def batch_tail(header_text: str) -> BatchTail:
    pairs = parse_properties(header_text)
    pairs.pop(CLUSTER, None)
    pairs.pop(POP_CK, None)
    return BatchTail(pairs, pairs.get(UNIQ_KEY))


def batch_properties(text: str, tail: BatchTail, cluster: str) -> str:
    """The stored text of one message of a batch (see the module's notes); ``cluster`` as for
    :func:`single_properties`."""
    text = _client_pairs(text)
    missing = {k: v for k, v in tail.pairs.items() if get_property(text, k) is None}
    return text + format_properties(missing) + cluster


def stored_tag(text: str) -> str | None:
    """The tag the consume queue files a stored message under (its TAGS, as Java's map has it)."""
    return get_property(text, TAGS)
