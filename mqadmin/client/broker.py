"""The admin client's broker admin calls: topics, offsets, runtime info, faults.

Kept apart from sending and pulling messages: these are one-off control
requests to a broker whose address the caller (or the NameServer) gives.
"""

from __future__ import annotations

from typing import Any

from broker_stub.faults import FAULT_CODE, RESPONSE_CODE_MAX, RESPONSE_CODE_MIN
from mqadmin.client.errors import AdminError, PerServer, asked, check_answer, parse_answer
from mqadmin.client.namesrv import NamesrvClient
from mqadmin.client.topic_text import attributes_text
from remoting import fastjson
from remoting.bodies import ClusterInfo, TopicConfig, parse_kv_table
from remoting.codes import DEFAULT_TOPIC, RequestCode, ResponseCode
from remoting.command import RemotingCommand, request


#: The response codes a broker stub can be told to reject sends with (``brokerFault --reject``): a code
#: travels in 16 bits in a ROCKETMQ binary header.
REJECT_CODES = (RESPONSE_CODE_MIN, RESPONSE_CODE_MAX)


class BrokerClient(NamesrvClient):
    """Broker admin requests, to one broker or to many in parallel."""

    # ------------------------------------------------------------------
    # brokers: admin

    async def broker_call(self, addr: str, req: RemotingCommand, what: str) -> RemotingCommand:
        return check_answer(addr, await self.invoke(addr, req), what)

    async def broker_fault(self, broker_addr: str, action: str, **params: object) -> dict[str, Any]:
        """Drive a broker stub's fault switchboard (request 9000, see :mod:`broker_stub.faults`).

        Returns the switchboard's whole state after the change. A Java broker
        does not know the code and answers REQUEST_CODE_NOT_SUPPORTED, which
        becomes an :class:`AdminError` like any refusal.
        """
        ext = {"action": action, **{k: str(v) for k, v in params.items()}}
        resp = await self.broker_call(broker_addr, request(FAULT_CODE, ext), f"fault {action}")
        state = parse_answer(broker_addr, fastjson.loads, resp.body)
        if not isinstance(state, dict):
            raise AdminError(f"{broker_addr}: malformed answer: fault state is not a JSON object")
        return state

    async def broker_addr_of(self, broker_name: str, broker_id: int = 0) -> str:
        """The address a NameServer holds for broker ``broker_name`` / ``broker_id``.

        Every NameServer is asked: they do not share state, and a broker partitioned from one (or
        dropped by it) is still known to the others. The error, when none knows it, names each one
        asked and what it knew.
        """
        answers = await self.cluster_infos_everywhere()
        for r in answers:
            if r.ok:
                addr = dict(getattr(r.value.broker_addr_table.get(broker_name), "broker_addrs", {})).get(broker_id)
                if addr is not None:
                    return addr

        def knew(info: ClusterInfo) -> str:
            data = info.broker_addr_table.get(broker_name)
            if data is not None:
                return f"{broker_name} has ids {', '.join(map(str, sorted(dict(data.broker_addrs))))}"
            return f"brokers {', '.join(sorted(info.broker_addr_table)) or 'none'}"

        what = broker_name if broker_id == 0 else f"{broker_name} id {broker_id}"
        raise AdminError(f"broker {what} is not known to any NameServer (asked {asked(answers, knew)})")

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = await self.broker_call(broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), "GET_BROKER_RUNTIME_INFO")
        return parse_answer(broker_addr, parse_kv_table, resp.body)

    async def runtime_infos(self, addrs: list[str]) -> list[PerServer]:
        """GET_BROKER_RUNTIME_INFO from many brokers in parallel; a silent one is an error entry."""
        return await self._each(
            addrs, lambda: request(RequestCode.GET_BROKER_RUNTIME_INFO), "GET_BROKER_RUNTIME_INFO",
            lambda r: parse_kv_table(r.body),
        )

    async def create_topic(self, broker_addr: str, tc: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) to one broker, with the header Java sends."""
        await self.broker_call(broker_addr, _create_topic_request(tc), f"create topic {tc.topic_name}")

    async def create_topic_on(self, addrs: list[str], tc: TopicConfig) -> list[PerServer]:
        return await self._each(addrs, lambda: _create_topic_request(tc), f"create topic {tc.topic_name}")

    async def delete_topic_in_brokers(self, addrs: list[str], topic: str) -> list[PerServer]:
        return await self._each(
            addrs, lambda: request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}), f"delete topic {topic}"
        )

    async def min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        req = request(RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id})
        return _int_ext(broker_addr, await self.broker_call(broker_addr, req, "GET_MIN_OFFSET"), "offset")

    async def max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        req = request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id, "committed": True})
        return _int_ext(broker_addr, await self.broker_call(broker_addr, req, "GET_MAX_OFFSET"), "offset")

    async def search_offset(self, broker_addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms``."""
        req = request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms})
        return _int_ext(broker_addr, await self.broker_call(broker_addr, req, "SEARCH_OFFSET_BY_TIMESTAMP"), "offset")

    async def topic_consumer_groups(self, broker_addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300); a broker that does not support it knows no groups."""
        resp = await self.invoke(broker_addr, request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}))
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return []
        check_answer(broker_addr, resp, f"consumer groups of {topic}")
        obj = parse_answer(broker_addr, fastjson.loads, resp.body) if resp.body else {}
        groups = obj.get("groupList") if isinstance(obj, dict) else None
        return sorted(str(g) for g in groups) if isinstance(groups, list) else []


def _int_ext(addr: str, resp: RemotingCommand, key: str) -> int:
    try:
        return int((resp.ext_fields or {})[key])
    except (KeyError, ValueError):
        raise AdminError(f"{addr}: answer without a numeric {key}") from None


def _create_topic_request(tc: TopicConfig) -> RemotingCommand:
    ext: dict[str, object] = {
        "topic": tc.topic_name,
        "defaultTopic": DEFAULT_TOPIC,
        "readQueueNums": tc.read_queue_nums,
        "writeQueueNums": tc.write_queue_nums,
        "perm": tc.perm,
        "topicFilterType": tc.topic_filter_type,
        "topicSysFlag": tc.topic_sys_flag,
        "order": tc.order,
        "attributes": attributes_text(tc.attributes),
    }
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
