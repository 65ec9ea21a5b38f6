"""A simulated consumer's answer to GET_CONSUMER_RUNNING_INFO (307), in the Java client's shape.

A broker relays ``mqadmin consumerStatus`` to each consumer of the group;
a Java push consumer answers with ConsumerRunningInfo: ``properties`` (its
settings as strings, among them the PROP_* keys consumerStatus reads:
start time, consume type, orderly, client version), ``subscriptionSet``
(sorted by topic@expression, as Java's TreeSet), ``mqTable`` (a
ProcessQueueInfo per owned queue, sorted as MessageQueue compares), an
empty ``mqPopTable``, ``statusTable`` (per subscribed topic) and an empty
``userConsumerInfo``. Java's client leaves the response's remark at
``not set any response code`` and the broker relays it as it is; so do we.

What a simulated consumer does not keep is reported as 0: per-topic pull
and consume rates and the cached bytes (it counts messages, not sizes).
There is no ``jstack`` (``consumerStatus -s``): a Python process has no
Java thread dump to give.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from remoting.codes import CURRENT_VERSION, ResponseCode, version_desc
from remoting.command import RemotingCommand, response_to
from remoting.mqjson import MessageQueue as JavaQueue
from remoting.mqjson import dumps
from simclient.consumer_options import CONSUME_FROM_WHERE, ConsumerOptions
from simclient.consumer_wire import Subscription
from simclient.process_queue import ProcessQueue
from simclient.rebalance import MessageQueue

NOT_SET_REMARK = "not set any response code"  # RemotingCommand.createResponseCommand's default remark
ZERO_STATUS = {"consumeFailedMsgs": 0, "consumeFailedTPS": 0.0, "consumeOKTPS": 0.0, "consumeRT": 0.0,
               "pullRT": 0.0, "pullTPS": 0.0}


def running_info(
    opts: ConsumerOptions,
    subs: Mapping[str, Subscription],
    process_queues: Mapping[MessageQueue, ProcessQueue],
    offsets: Mapping[MessageQueue, int],
    *,
    started_ms: int,
) -> dict[str, Any]:
    """ConsumerRunningInfo of a consumer, fields in fastjson's (alphabetical) order."""
    properties = {
        "consumerGroup": opts.group,
        "messageModel": "CLUSTERING",
        "consumeFromWhere": CONSUME_FROM_WHERE[opts.consume_from],
        "consumeThreadMin": str(opts.consume_threads),
        "consumeThreadMax": str(opts.consume_threads),
        "pullBatchSize": str(opts.pull_batch_size),
        "pullThresholdForQueue": str(opts.pull_threshold_for_queue),
        "maxReconsumeTimes": str(opts.max_reconsume_times),
        "pollNameServerInterval": str(int(opts.poll_name_server_interval * 1000)),
        "heartbeatBrokerInterval": str(int(opts.heartbeat_broker_interval * 1000)),
        "persistConsumerOffsetInterval": str(int(opts.persist_consumer_offset_interval * 1000)),
        "namesrvAddr": ";".join(opts.namesrv_addrs),
        "PROP_NAMESERVER_ADDR": "".join(f"{addr};" for addr in opts.namesrv_addrs),
        "PROP_THREADPOOL_CORE_SIZE": str(opts.consume_threads),
        "PROP_CONSUMEORDERLY": "false",
        "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
        "PROP_CLIENT_VERSION": version_desc(CURRENT_VERSION),
        "PROP_CONSUMER_START_TIMESTAMP": str(started_ms),
    }
    subscriptions = sorted(subs.values(), key=lambda s: f"{s.topic}@{s.expression}")
    mq_table: dict[JavaQueue, dict[str, Any]] = {}
    for mq in sorted(process_queues):
        pq = process_queues[mq]
        waiting = list(pq.msgs)
        mq_table[JavaQueue(mq[0], mq[1], mq[2])] = {
            "cachedMsgCount": len(waiting),
            "cachedMsgMaxOffset": pq.max_offset if waiting else 0,
            "cachedMsgMinOffset": waiting[0] if waiting else 0,
            "cachedMsgSizeInMiB": 0,
            "commitOffset": offsets.get(mq, 0),
            "droped": pq.dropped,
            "lastConsumeTimestamp": pq.last_consume_ms,
            "lastLockTimestamp": pq.created_ms,
            "lastPullTimestamp": pq.last_pull_ms,
            "locked": False,
            "transactionMsgCount": 0,
            "transactionMsgMaxOffset": 0,
            "transactionMsgMinOffset": 0,
            "tryUnlockTimes": 0,
        }
    return {
        "mqPopTable": {},
        "mqTable": mq_table,
        "properties": properties,
        "statusTable": {topic: dict(ZERO_STATUS) for topic in sorted(subs)},
        "subscriptionSet": [s.to_json() for s in subscriptions],
        "userConsumerInfo": {},
    }


def response(req: RemotingCommand, info: dict[str, Any]) -> RemotingCommand:
    """The response a Java client sends to a broker's GET_CONSUMER_RUNNING_INFO."""
    return response_to(req, ResponseCode.SUCCESS, NOT_SET_REMARK, body=dumps(info))


__all__ = ["response", "running_info"]
