"""The admin client's NameServer calls: reads from any one, writes to every one.

Reads go to whichever NameServer answers first; writes go to all of them in
parallel with one result per NameServer, as RocketMQ's admin tools do,
since NameServers do not replicate among themselves.
"""

from __future__ import annotations

from typing import Any

from mqadmin.client.core import ClientCore
from mqadmin.client.errors import AdminError, NotFound, PerServer, asked, parse_answer
from namesrv.liveinfo import LIVE_TABLE_CODE
from namesrv.provisional import RESTORED_BROKERS_CODE
from remoting import fastjson, properties
from remoting import requests as rq
from remoting.bodies import (
    ClusterInfo,
    TopicRouteData,
    parse_kv_table,
    parse_topic_list,
)
from remoting.codes import NAMESPACE_ORDER_TOPIC_CONFIG
from remoting.command import request


class NamesrvClient(ClientCore):
    """NameServer reads and writes (GET_ROUTEINFO, cluster info, KV config, write perms...)."""

    # ------------------------------------------------------------------
    # NameServer reads

    async def cluster_info(self) -> ClusterInfo:
        addr, resp = await self._any(rq.cluster_info, "GET_BROKER_CLUSTER_INFO")
        return parse_answer(addr, ClusterInfo.decode, resp.body)

    async def topic_route(self, topic: str) -> TopicRouteData:
        addr, resp = await self._any(lambda: rq.get_route(topic), f"route of topic {topic}")
        return parse_answer(addr, TopicRouteData.decode, resp.body)

    async def topic_routes_everywhere(self, topic: str) -> list[PerServer]:
        """The route as each NameServer sees it (they need not agree)."""
        return await self._all(lambda: rq.get_route(topic), f"route of topic {topic}", lambda r: TopicRouteData.decode(r.body))

    async def route_with_broker(self, topic: str, broker_name: str) -> TopicRouteData:
        """The topic's route from a NameServer that routes it to ``broker_name``: every NameServer is
        asked, as a broker partitioned from one is still routed by the others; an error names each one
        asked and the brokers its route held."""
        answers = await self.topic_routes_everywhere(topic)
        for r in answers:
            if r.ok and any(b.broker_name == broker_name for b in r.value.broker_datas):
                return r.value  # type: ignore[no-any-return]

        def held(route: TopicRouteData) -> str:
            return f"brokers {', '.join(sorted(b.broker_name for b in route.broker_datas)) or 'none'}"

        raise AdminError(f"no NameServer routes topic {topic} to broker {broker_name} (asked {asked(answers, held)})")

    async def cluster_infos_everywhere(self) -> list[PerServer]:
        """Each NameServer's own ClusterInfo (they need not agree)."""
        return await self._all(rq.cluster_info, "GET_BROKER_CLUSTER_INFO", lambda r: ClusterInfo.decode(r.body))

    async def topic_lists_everywhere(self) -> list[PerServer]:
        return await self._all(rq.all_topics, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", lambda r: parse_topic_list(r.body)[0])

    async def broker_live_tables_everywhere(self) -> list[PerServer]:
        """Each NameServer's GET_BROKER_LIVE_TABLE (ours, code 9001): how long each broker has been silent.

        A NameServer without it (Apache's) answers REQUEST_CODE_NOT_SUPPORTED, which is that server's error.
        """
        return await self._all(lambda: request(LIVE_TABLE_CODE), "GET_BROKER_LIVE_TABLE", lambda r: _live_rows(r.body))

    async def topic_list(self) -> list[str]:
        addr, resp = await self._any(rq.all_topics, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")
        return parse_answer(addr, lambda b: parse_topic_list(b)[0], resp.body)

    async def get_kv(self, namespace: str, key: str) -> str:
        _, resp = await self._any(lambda: rq.get_kv(namespace, key), f"get kv {namespace}/{key}")
        return (resp.ext_fields or {}).get("value", "")

    async def kv_list(self, namespace: str) -> dict[str, str]:
        addr, resp = await self._any(lambda: rq.kv_list(namespace), f"kv list of {namespace}")
        return parse_answer(addr, parse_kv_table, resp.body)

    async def namesrv_configs(self) -> list[PerServer]:
        return await self._all(
            rq.get_namesrv_config, "GET_NAMESRV_CONFIG", lambda r: properties.loads(r.body.decode("utf-8", "replace"))
        )

    async def restored_brokers_everywhere(self) -> list[PerServer]:
        """Each NameServer's brokers restored by a warm restart and not registered since (code 9002, ours).

        Value: a list of ``{clusterName, brokerName, brokerId, brokerAddr, expiresInMillis}``;
        a NameServer without the code (a Java one) gives an error result.
        """
        return await self._all(lambda: request(RESTORED_BROKERS_CODE), "GET_RESTORED_BROKERS",
                               lambda r: _restored_rows(r.body))

    async def warm_restarts(self) -> list[PerServer]:
        """Each NameServer's answer to code 9002 whole: ``restore`` (what its start restored from the route
        snapshot, ``{"brokers": N, "topics": M}``, or None after a cold start) and ``brokers`` (still provisional)."""
        return await self._all(lambda: request(RESTORED_BROKERS_CODE), "GET_RESTORED_BROKERS",
                               lambda r: _restore_answer(r.body))

    async def masters_of_cluster(self, cluster: str, info: ClusterInfo | None = None) -> dict[str, str]:
        """Broker name -> master address for every broker group of ``cluster`` (CommandUtil)."""
        return {name: addrs[0] for name, addrs in (await self.brokers_of_cluster(cluster, info)).items() if 0 in addrs}

    async def brokers_of_cluster(self, cluster: str, info: ClusterInfo | None = None) -> dict[str, dict[int, str]]:
        """Broker name -> {brokerId: address}; an unknown cluster is an error naming the known ones."""
        info = info or await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(f"cluster {cluster} is not known to the NameServer (clusters: {known})")
        return {n: dict(info.broker_addr_table[n].broker_addrs) for n in sorted(names) if n in info.broker_addr_table}

    # ------------------------------------------------------------------
    # NameServer writes, to every NameServer

    async def put_kv(self, namespace: str, key: str, value: str) -> list[PerServer]:
        return await self._all(lambda: rq.put_kv(namespace, key, value), "PUT_KV_CONFIG")

    async def delete_kv(self, namespace: str, key: str) -> list[PerServer]:
        return await self._all(lambda: rq.delete_kv(namespace, key), "DELETE_KV_CONFIG")

    async def wipe_write_perm(self, broker_name: str) -> list[PerServer]:
        return await self._all(
            lambda: rq.wipe_write_perm(broker_name), "WIPE_WRITE_PERM_OF_BROKER",
            lambda r: int((r.ext_fields or {}).get("wipeTopicCount", "0")),
        )

    async def add_write_perm(self, broker_name: str) -> list[PerServer]:
        return await self._all(
            lambda: rq.add_write_perm(broker_name), "ADD_WRITE_PERM_OF_BROKER",
            lambda r: int((r.ext_fields or {}).get("addTopicCount", "0")),
        )

    async def update_namesrv_config(self, key: str, value: str) -> list[PerServer]:
        return await self._all(lambda: rq.update_namesrv_config({key: value}), "UPDATE_NAMESRV_CONFIG")

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None) -> list[PerServer]:
        return await self._all(lambda: rq.delete_topic(topic, cluster), "DELETE_TOPIC_IN_NAMESRV")

    async def put_order_conf(self, topic: str, conf: str, *, whole_cluster: bool) -> list[PerServer]:
        """ORDER_TOPIC_CONFIG for ``topic`` on every NameServer (createOrUpdateOrderConf).

        For a single broker (``whole_cluster`` false) Java merges ``brokerName:queues``
        into the value already stored; for a cluster it replaces it.
        """
        value = conf
        if not whole_cluster:
            try:
                old = await self.get_kv(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            except NotFound:
                old = ""
            merged: dict[str, str] = {}
            for item in [*old.split(";"), conf]:
                if item.strip():
                    merged[item.split(":", 1)[0]] = item
            value = ";".join(merged.values())
        return await self.put_kv(NAMESPACE_ORDER_TOPIC_CONFIG, topic, value)


def _live_rows(body: bytes) -> list[dict[str, Any]]:
    """The ``brokers`` rows of a GET_BROKER_LIVE_TABLE body; ValueError if it is not that shape."""
    obj = fastjson.loads(body)
    rows = obj.get("brokers") if isinstance(obj, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("no brokers list in the live table")
    for r in rows:
        if not isinstance(r.get("brokerAddr"), str) or not all(
                isinstance(r.get(k), int) for k in ("lastUpdateAgoMillis", "heartbeatTimeoutMillis")):
            raise ValueError(f"malformed live table entry {r!r}"[:200])
    return rows


def _restored_rows(body: bytes) -> list[dict[str, Any]]:
    return _restore_answer(body)["brokers"]  # type: ignore[no-any-return]


def _restore_answer(body: bytes) -> dict[str, Any]:
    obj = fastjson.loads(body)
    rows = obj.get("brokers") if isinstance(obj, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("no brokers list")
    restore = obj.get("restore")
    if restore is not None and not (isinstance(restore, dict) and all(
            isinstance(restore.get(k), int) for k in ("brokers", "topics"))):
        raise ValueError(f"malformed restore summary {restore!r}"[:200])
    return {"restore": restore, "brokers": rows}
