"""Builders for the requests that brokers and admin tools send a NameServer.

Each returns a ready :class:`RemotingCommand` with the header keys and body
a Java peer would send, so the broker stub, the admin client and the tests
build identical bytes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from remoting import properties
from remoting.bodies import DataVersion, TopicConfig
from remoting.codes import CURRENT_VERSION, RequestCode
from remoting.command import RemotingCommand, request
from remoting.register_body import encode_register_body


def register_broker(
    *,
    cluster: str,
    broker_name: str,
    broker_addr: str,
    broker_id: int,
    topics: Iterable[TopicConfig],
    data_version: DataVersion,
    ha_server_addr: str | None = None,
    filter_servers: Iterable[str] = (),
    compressed: bool = False,
    enable_acting_master: bool | None = False,
    heartbeat_timeout_ms: int | None = None,
    zone_name: str | None = None,
    version: int = CURRENT_VERSION,
    oneway: bool = False,
    mapping_infos: dict[str, dict[str, Any]] | None = None,
) -> RemotingCommand:
    body = encode_register_body(
        topics,
        data_version,
        filter_servers=filter_servers,
        compressed=compressed,
        version=version,
        mapping_infos=mapping_infos,
    )
    host, _, port = broker_addr.rpartition(":")
    ext: dict[str, object] = {
        "brokerName": broker_name,
        "brokerAddr": broker_addr,
        "clusterName": cluster,
        "haServerAddr": ha_server_addr or f"{host}:{int(port) + 1}",
        "brokerId": broker_id,
        "compressed": compressed,
        "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF,
    }
    if enable_acting_master is not None:
        ext["enableActingMaster"] = enable_acting_master
    if heartbeat_timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = heartbeat_timeout_ms
    if zone_name is not None:
        ext["__ZONE_NAME"] = zone_name
    return request(RequestCode.REGISTER_BROKER, ext, body, version=version, oneway=oneway)


def unregister_broker(*, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> RemotingCommand:
    return request(
        RequestCode.UNREGISTER_BROKER,
        {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster, "brokerId": broker_id},
    )


def get_route(topic: str, *, version: int = CURRENT_VERSION, accept_standard_json: bool | None = None) -> RemotingCommand:
    ext: dict[str, object] = {"topic": topic}
    if accept_standard_json is not None:
        ext["acceptStandardJsonOnly"] = accept_standard_json
    return request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=version)


def cluster_info() -> RemotingCommand:
    return request(RequestCode.GET_BROKER_CLUSTER_INFO)


def put_kv(namespace: str, key: str, value: str) -> RemotingCommand:
    return request(RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})


def get_kv(namespace: str, key: str) -> RemotingCommand:
    return request(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})


def delete_kv(namespace: str, key: str) -> RemotingCommand:
    return request(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})


def kv_list(namespace: str) -> RemotingCommand:
    return request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})


def wipe_write_perm(broker_name: str) -> RemotingCommand:
    return request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})


def add_write_perm(broker_name: str) -> RemotingCommand:
    return request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})


def all_topics() -> RemotingCommand:
    return request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)


def topics_by_cluster(cluster: str) -> RemotingCommand:
    return request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})


def delete_topic(topic: str, cluster: str | None = None) -> RemotingCommand:
    ext: dict[str, object] = {"topic": topic}
    if cluster:
        ext["clusterName"] = cluster
    return request(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)


def get_namesrv_config() -> RemotingCommand:
    return request(RequestCode.GET_NAMESRV_CONFIG)


def update_namesrv_config(props: dict[str, str]) -> RemotingCommand:
    """Properties.store's escaping, so any value arrives exactly as given."""
    return request(RequestCode.UPDATE_NAMESRV_CONFIG, body=properties.store(props, sort=False).encode())


def query_data_version(
    *, cluster: str, broker_name: str, broker_addr: str, broker_id: int, data_version: DataVersion
) -> RemotingCommand:
    return request(
        RequestCode.QUERY_DATA_VERSION,
        {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster, "brokerId": broker_id},
        data_version.encode(),
    )


def broker_heartbeat(*, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> RemotingCommand:
    return request(
        RequestCode.BROKER_HEARTBEAT,
        {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster, "brokerId": broker_id},
    )
