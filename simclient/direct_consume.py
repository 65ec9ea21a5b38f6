"""A simulated consumer's answer to CONSUME_MESSAGE_DIRECTLY (309), in the Java client's shape.

RocketMQ Dashboard's "consume message directly" (and Apache mqadmin's
``consumeMessage -d``) asks a broker, which relays the stored message to the
consumer owning the client id. A Java push consumer (ClientRemotingProcessor
and ConsumeMessageConcurrentlyService.consumeMessageDirectly) decodes it,
runs its listener on it at once and answers a ConsumeMessageDirectlyResult:
``CR_SUCCESS`` or ``CR_LATER`` (the listener asked to consume it later),
``order`` false, ``autoCommit`` true, the time it took. A simulated consumer
"consumes" it as it consumes a pulled message: it fails with its
``consume_failure_rate``. Nothing is sent back or committed: a direct
consumption is outside the queue's progress, as in Java.
"""

from __future__ import annotations

import random
import time

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.mqjson import dumps
from simclient.decode import DecodeError, decode_pulled


def direct_consume_response(req: RemotingCommand, failure_rate: float, rng: random.Random) -> RemotingCommand:
    """The response a Java push consumer sends to a broker's CONSUME_MESSAGE_DIRECTLY; the consumer's
    ``consume_failure_rate`` and random source decide it, as for a pulled message."""
    started = time.monotonic()
    try:
        messages = decode_pulled(req.body)
    except DecodeError as exc:
        return response_to(req, ResponseCode.SYSTEM_ERROR, f"the message to consume directly is malformed: {exc}")
    if len(messages) != 1:
        return response_to(req, ResponseCode.SYSTEM_ERROR, f"expected one message to consume, got {len(messages)}")
    failed = failure_rate > 0 and rng.random() < failure_rate
    result = {
        "autoCommit": True,
        "consumeResult": "CR_LATER" if failed else "CR_SUCCESS",
        "order": False,
        "spentTimeMills": int((time.monotonic() - started) * 1000),
    }
    return response_to(req, ResponseCode.SUCCESS, body=dumps(result))


__all__ = ["direct_consume_response"]
