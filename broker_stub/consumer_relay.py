"""Requests a broker relays to one consumer: GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309).

``consumerStatus`` (307) and the dashboard's "consume message directly"
(309) ask a broker; the broker asks the consumer that owns the client id.
For 309 the broker first adds what AdminBrokerProcessor.consumeMessageDirectly
adds: header fields ``brokerName``, ``topicSysFlag`` (the topic's) and
``groupSysFlag`` (the subscription group's, when known), and as the body the
stored message that ``msgId`` (an offset message id) names; a ``msgId`` this
broker holds no message for is SYSTEM_ERROR ``no message ... in this
broker`` (Java's lookup fails there too). The consumer answers with a
ConsumeMessageDirectlyResult, relayed as it is.

Then, as AdminBrokerProcessor.callConsumer does: find the connection the client's
heartbeats of that group came over (else SYSTEM_ERROR ``The Consumer <G>
<C> not online``; a client older than V3_1_8_SNAPSHOT is refused too), send
it a request with the same code, header fields and body, and answer the
admin tool with the consumer's own response: its code, remark, header
fields, language, version and body (a ConsumerRunningInfo), under the
admin's opaque. No answer within ``RELAY_TIMEOUT`` (Broker2Client's 10 s)
is CONSUME_MSG_TIMEOUT (207); a consumer connection that is gone is
SYSTEM_ERROR ``invoke consumer <G> <C> Exception: ...``. Both are found by
:meth:`ConsumerRelay.expire`, once a second.

The consumer's response reaches :meth:`ConsumerRelay.response` through the
reactor's response hook; only a response with the opaque the broker used,
on the connection it was sent to, is relayed. At most ``MAX_PENDING``
requests wait for consumers at once (beyond, SYSTEM_BUSY).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from broker_stub.clients import ClientTable
from broker_stub.common import Reject
from remoting.codec import encode
from remoting.codes import RequestCode, ResponseCode, Version, version_desc
from remoting.command import RemotingCommand, request, response_to

RELAY_TIMEOUT = 10.0  # s
MAX_PENDING = 1024
TIMEOUT_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingTimeoutException"
SEND_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingSendRequestException"

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]
#: What 309 adds to the request before relaying it: (header fields, body), or Reject.
DirectPreparer = Callable[[RemotingCommand], tuple[dict[str, str], bytes]]


@dataclass(frozen=True, slots=True)
class _Waiting:
    admin: RemotingCommand  # the admin's request (its opaque, serialization and flags answer it)
    admin_conn: Hashable
    consumer_conn: Hashable
    consumer_peer: str
    group: str
    client_id: str
    deadline: float


class ConsumerRelay:
    def __init__(
        self,
        clients: ClientTable,
        *,
        write_to: Callable[[Hashable, bytes], bool],
        peer_of: Callable[[Hashable], str | None],
        clock: Callable[[], float],
        prepare_direct: DirectPreparer | None = None,
    ) -> None:
        self.clients = clients
        self.prepare_direct = prepare_direct
        self.write_to = write_to
        self.peer_of = peer_of
        self.clock = clock
        self.waiting: dict[int, _Waiting] = {}
        self._opaques = itertools.count(1)

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_CONSUMER_RUNNING_INFO: self.request,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_directly}

    def consume_directly(self, req: RemotingCommand, conn: Hashable) -> None:
        """309: the stored message and the broker's fields added, then relayed as 307 is."""
        fields, body = self.prepare_direct(req) if self.prepare_direct is not None else ({}, req.body)
        self.request(req, conn, fields, body)

    def request(self, req: RemotingCommand, conn: Hashable, fields: dict[str, str] | None = None,
                body: bytes | None = None) -> None:
        """Relay ``req`` to the consumer its header names (``fields`` added, ``body`` instead of its own)."""
        group, client_id = req.ext("consumerGroup") or "", req.ext("clientId") or ""
        info = self.clients.group(group)
        consumer_conn = info.clients.get(client_id) if info is not None else None
        if consumer_conn is None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        client = self.clients.clients.get(client_id)
        version = client.version if client is not None else 0
        if version < Version.V3_1_8_SNAPSHOT:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> Version <{version_desc(version)}> "
                                                    "too low to finish, please upgrade it to V3_1_8_SNAPSHOT")
        if len(self.waiting) >= MAX_PENDING:
            raise Reject(ResponseCode.SYSTEM_BUSY, f"{MAX_PENDING} requests already wait for consumers' answers")
        forward = request(req.code, dict(req.ext_fields or {}) | (fields or {}), req.body if body is None else body)
        forward.opaque = next(self._opaques) & 0x7FFFFFFF
        peer = self.peer_of(consumer_conn) or ""
        if not self.write_to(consumer_conn, encode(forward)):
            raise Reject(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: "
                                                    f"{SEND_EXCEPTION}: send request to <{peer}> failed")
        self.waiting[forward.opaque] = _Waiting(req, conn, consumer_conn, peer, group, client_id,
                                                self.clock() + RELAY_TIMEOUT)

    def response(self, conn: Hashable, resp: RemotingCommand) -> None:
        """A response a client sent: if it answers a relayed request, hand it to the admin tool."""
        waiting = self.waiting.get(resp.opaque)
        if waiting is None or waiting.consumer_conn != conn:
            return  # late (already timed out), or not ours
        del self.waiting[resp.opaque]
        if waiting.admin.flag & 2:
            return
        resp.opaque = waiting.admin.opaque
        resp.serialize_type = waiting.admin.serialize_type
        self.write_to(waiting.admin_conn, encode(resp))

    def expire(self) -> None:
        """Answer the requests whose consumer is gone or silent for ``RELAY_TIMEOUT`` (once a second)."""
        now = self.clock()
        for opaque, w in list(self.waiting.items()):
            if self.peer_of(w.consumer_conn) is None:
                remark = (f"invoke consumer <{w.group}> <{w.client_id}> Exception: {SEND_EXCEPTION}: "
                          f"the connection to <{w.consumer_peer}> closed")
                self._fail(opaque, ResponseCode.SYSTEM_ERROR, remark)
            elif now >= w.deadline:
                remark = (f"consumer <{w.group}> <{w.client_id}> Timeout: {TIMEOUT_EXCEPTION}: wait response on the "
                          f"channel <{w.consumer_peer}> timeout, {int(RELAY_TIMEOUT * 1000)}(ms)")
                self._fail(opaque, ResponseCode.CONSUME_MSG_TIMEOUT, remark)

    def _fail(self, opaque: int, code: int, remark: str) -> None:
        w = self.waiting.pop(opaque)
        if not w.admin.flag & 2:
            self.write_to(w.admin_conn, encode(response_to(w.admin, code, remark)))


__all__ = ["ConsumerRelay"]
