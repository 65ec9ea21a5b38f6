"""What a slave copies from its master besides messages: topic configs and consumer offsets.

Java's ``SlaveSynchronize`` asks the master every 10 s for its topic table
(GET_ALL_TOPIC_CONFIG, 21) and its consumer offsets
(GET_ALL_CONSUMER_OFFSET, 43). Without the topics a slave could not serve
a pull (TOPIC_NOT_EXIST); without the offsets a consumer that turns to the
slave while the master is down would not find where its group was. The
stub does the same, and also at once when replication brings a message of
a topic the slave does not know yet.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

import trio

from broker_stub.topics import TopicTable
from remoting import fastjson
from remoting.acl import Credentials
from remoting.bodies import BodyError, TopicConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import RemotingError, connect

log = logging.getLogger("broker_stub")

GET_ALL_CONSUMER_OFFSET = 43
SYNC_INTERVAL = 10.0  # s, SlaveSynchronize's period
TIMEOUT = 3.0


def parse_topic_table(body: bytes) -> list[TopicConfig]:
    doc = fastjson.loads(body)
    table = doc.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise BodyError("topicConfigTable is not an object")
    return [TopicConfig.from_obj(name, obj) for name, obj in table.items()]


def parse_offset_table(body: bytes) -> dict[tuple[str, str, int], int]:
    table = fastjson.loads(body).get("offsetTable") or {}
    out: dict[tuple[str, str, int], int] = {}
    for key, queues in table.items():
        topic, sep, group = str(key).rpartition("@")
        if sep and isinstance(queues, dict):
            for queue_id, offset in queues.items():
                out[(group, topic, int(queue_id))] = int(offset)
    return out


class SlaveSync:
    def __init__(
        self,
        topics: TopicTable,
        *,
        master_addr: Callable[[], str | None],
        set_offset: Callable[[str, str, int, int], None],
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.topics = topics
        self.credentials = credentials  # signs the requests when the master checks accounts
        self.master_addr = master_addr
        self.set_offset = set_offset
        self.tls = tls
        self._wake = trio.Event()
        self.syncs = 0

    def kick(self) -> None:
        """Sync now (a replicated message named a topic this slave does not know)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            addr = self.master_addr()
            if addr is not None:
                try:
                    await self.sync_once(addr)
                except (RemotingError, BodyError, ValueError, TypeError, AttributeError) as exc:
                    log.warning("sync from master %s failed: %s", addr, exc)
            with trio.move_on_after(SYNC_INTERVAL if addr is not None else 0.5):
                await self._wake.wait()
            self._wake = trio.Event()

    async def sync_once(self, addr: str) -> None:
        async with connect(addr, connect_timeout=TIMEOUT, tls=self.tls, credentials=self.credentials) as client:
            resp = await client.invoke(request(RequestCode.GET_ALL_TOPIC_CONFIG), TIMEOUT)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                self._install_topics(parse_topic_table(resp.body))
            resp = await client.invoke(request(GET_ALL_CONSUMER_OFFSET), TIMEOUT)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                for (group, topic, queue_id), offset in parse_offset_table(resp.body).items():
                    self.set_offset(group, topic, queue_id, offset)
        self.syncs += 1

    def _install_topics(self, configs: list[TopicConfig]) -> None:
        changed = [tc for tc in configs if self.topics.get(tc.topic_name) != tc]
        if changed:
            self.topics.restore(changed, None, source="the master's topic table")
            self.topics.changed()  # one version bump (and one save and registration) for the lot


__all__ = ["GET_ALL_CONSUMER_OFFSET", "SlaveSync", "parse_offset_table", "parse_topic_table"]
