"""GET_ALL_PRODUCER_INFO (328): the live producers of every group (``mqadmin producer -b``).

The body is 5.3.3's ProducerTableInfo: ``{"data":{group:[ProducerInfo,...]}}``,
groups in the order Java's HashMap of them iterates, each ProducerInfo with
``clientId``, ``language``, ``lastUpdateTimestamp`` (the client's latest
heartbeat), ``remoteIP`` (``/host:port``, Java's channel address) and
``version``. Java consumers heartbeat their inner producer as the group
``CLIENT_INNER_PRODUCER``, so they are listed there as a Java broker lists
them. Bounded by the client table (``MAX_CLIENTS``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from broker_stub.clients import Client, ClientTable
from remoting.javahash import hash_order, table_size
from remoting.mqjson import dumps


def producer_table_body(clients: ClientTable, peer_of: Callable[[Hashable], str | None]) -> bytes:
    groups: dict[str, list[tuple[str, Client]]] = {}
    for client_id, client in clients.clients.items():
        for group in sorted(client.producer_groups):
            groups.setdefault(group, []).append((client_id, client))
    data = {
        group: [{"clientId": client_id, "language": client.language, "lastUpdateTimestamp": client.last_update,
                 "remoteIP": "/" + (peer_of(client.conn) or ""), "version": client.version}
                for client_id, client in groups[group]]
        for group in hash_order(list(groups), table_size(len(groups)))
    }
    return dumps({"data": data})


__all__ = ["producer_table_body"]
