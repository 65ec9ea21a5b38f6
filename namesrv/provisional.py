"""Request code 9002 ``GET_RESTORED_BROKERS`` (ours): which routes a warm restart restored and nobody confirmed yet.

After a warm restart (see :mod:`namesrv.snapshot`) the NameServer answers
routes from its snapshot at once. Until a restored broker registers again
on a connection of its own, its entry is provisional: the broker may have
died while the NameServer was down, and then it stays routed until its
heartbeat timeout. The standard answers (GET_BROKER_CLUSTER_INFO, routes)
stay exactly Java's, so a Java client sees nothing new; tools that want to
know ask this code, which no Apache RocketMQ request uses (like 9000, the
broker stub's fault switchboard, and 9001, the live table). A Java
NameServer answers it with REQUEST_CODE_NOT_SUPPORTED, which callers read
as "nothing provisional".

Answer: SUCCESS with a JSON body::

    {"restore": null | {"brokers": N, "topics": M},
     "brokers": [{"clusterName", "brokerName", "brokerId", "brokerAddr",
                  "expiresInMillis"}, ...]}

``restore`` says what the start restored (null after a cold start);
``brokers`` lists the entries still provisional, sorted, and is bounded by
the number of brokers in the snapshot.
"""

from __future__ import annotations

from typing import Any

import orjson

from namesrv.route_state import Restored
from namesrv.routes import RouteTable
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to

#: Request code of GET_RESTORED_BROKERS (not used by any Apache RocketMQ request).
RESTORED_BROKERS_CODE = 9002


def restored_brokers(table: RouteTable, restored: Restored | None, now_ms: float) -> dict[str, Any]:
    """The documented body, as an object (pure: state and time in, data out)."""
    if restored is None:
        return {"restore": None, "brokers": []}
    rows = [
        {
            "clusterName": b.cluster,
            "brokerName": b.name,
            "brokerId": b.broker_id,
            "brokerAddr": b.addr,
            "expiresInMillis": max(0, int(b.last_update_ms + b.timeout_ms - now_ms)),
        }
        for b in restored.provisional(table)
    ]
    rows.sort(key=lambda r: (r["clusterName"], r["brokerName"], r["brokerId"], r["brokerAddr"]))
    return {"restore": {"brokers": restored.brokers, "topics": restored.topics}, "brokers": rows}


def answer(req: RemotingCommand, table: RouteTable, restored: Restored | None, now_ms: float) -> RemotingCommand:
    return response_to(req, ResponseCode.SUCCESS, body=orjson.dumps(restored_brokers(table, restored, now_ms)))
