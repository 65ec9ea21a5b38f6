"""Request code 9001 ``GET_BROKER_LIVE_TABLE`` (ours): how long ago each broker was last heard from.

Apache RocketMQ has no NameServer request that exposes its
``brokerLiveTable`` (the controller's internal 1016 is a different thing),
so a hung broker -- SIGSTOPped, or stuck in GC -- looks exactly like a
healthy one in every standard answer until its heartbeat timeout expires
(120 s by default). This answer lets ``mqadmin watch`` show the silence as
it grows. The code is unused by Apache, as 9000 (the broker stub's fault
switchboard) is.

Answer: SUCCESS with a JSON body
``{"brokers": [{"clusterName", "brokerName", "brokerId", "brokerAddr",
"lastUpdateAgoMillis", "heartbeatTimeoutMillis"}, ...]}`` sorted by
cluster, name and id. Ages come from the NameServer's own monotonic clock,
so they do not depend on either side's wall clock. The body is bounded by
the number of registered brokers (about 150 bytes each) and building it is
one pass over the live table: a few ms even for thousands of brokers.
"""

from __future__ import annotations

from typing import Any

import orjson

from namesrv.routes import RouteTable
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to

#: Request code of GET_BROKER_LIVE_TABLE (not used by any Apache RocketMQ request).
LIVE_TABLE_CODE = 9001


def live_table(table: RouteTable, now_ms: float) -> dict[str, Any]:
    """The documented body, as an object (pure: state and time in, data out)."""
    rows = [
        {
            "clusterName": b.cluster,
            "brokerName": b.name,
            "brokerId": b.broker_id,
            "brokerAddr": b.addr,
            "lastUpdateAgoMillis": max(0, int(now_ms - b.last_update_ms)),
            "heartbeatTimeoutMillis": int(b.timeout_ms),
        }
        for b in table.live_brokers()
    ]
    rows.sort(key=lambda r: (r["clusterName"], r["brokerName"], r["brokerId"], r["brokerAddr"]))
    return {"brokers": rows}


def answer(req: RemotingCommand, table: RouteTable, now_ms: float) -> RemotingCommand:
    """The SUCCESS response to a GET_BROKER_LIVE_TABLE request."""
    return response_to(req, ResponseCode.SUCCESS, body=orjson.dumps(live_table(table, now_ms)))
