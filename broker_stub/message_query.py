"""QUERY_MESSAGE (12): the messages of a topic that carry a key, as ``queryMsgByKey`` and
``queryMsgByUniqueKey`` ask every broker of the topic's route.

Answered as QueryMessageProcessor does: the records (commit-log layout, oldest
first) of at most ``maxNum`` messages, capped at ``maxMsgsNumBatch`` (64), or
``defaultQueryMaxNum`` (32) when the request carries ``_UNIQUE_KEY_QUERY=true``;
``indexLastUpdateTimestamp`` / ``indexLastUpdatePhyoffset`` name the newest
message indexed. Nothing found is QUERY_NOT_FOUND (22) with Java's remark and
both header fields 0. The key index is :mod:`broker_stub.query_index`; the
query first lets it catch up one slice, so a message stored just before is found.

One answer carries at most ``MAX_ANSWER_BYTES`` of records beyond its first
(Java sends them all, up to 64 messages of up to 4 MiB each).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from broker_stub.common import Reject, ext_bool, ext_int
from broker_stub.query_index import KeyIndex
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to

MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch
DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG
MAX_ANSWER_BYTES = 8 * 1024 * 1024
NOT_FOUND_REMARK = "can not find message, maybe time range not correct"
INT64_MAX = 2**63 - 1

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]


class MessageQuery:
    def __init__(self, index: KeyIndex, setting: Callable[[str, int], int] = lambda key, default: default) -> None:
        self.index = index
        self.setting = setting  # a Java store setting (maxMsgsNumBatch, defaultQueryMaxNum), as configured

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.QUERY_MESSAGE: self.query_message}

    def query_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        for field in ("topic", "key", "maxNum", "beginTimestamp", "endTimestamp"):  # @CFNotNull in Java
            if req.ext(field) is None:
                raise Reject(ResponseCode.SYSTEM_ERROR, f"the custom field <{field}> is null")
        topic, key = req.ext("topic") or "", req.ext("key") or ""
        max_num = ext_int(req, "maxNum", 0)
        if ext_bool(req, UNIQUE_KEY_QUERY):
            max_num = self.setting("defaultQueryMaxNum", DEFAULT_QUERY_MAX_NUM)
        max_num = min(max_num, self.setting("maxMsgsNumBatch", MAX_MSGS_NUM_BATCH))
        begin, end = ext_int(req, "beginTimestamp", 0), ext_int(req, "endTimestamp", INT64_MAX)
        index = self.index
        index.catch_up()
        records = index.find(topic, key, max_num, begin, end)
        if not records:
            return response_to(req, ResponseCode.QUERY_NOT_FOUND, NOT_FOUND_REMARK,
                               ext_fields={"indexLastUpdateTimestamp": 0, "indexLastUpdatePhyoffset": 0})
        kept: list[bytes] = []
        size = 0
        for record in records:
            if kept and size + len(record) > MAX_ANSWER_BYTES:
                break
            kept.append(record)
            size += len(record)
        return response_to(req, ResponseCode.SUCCESS, body=b"".join(kept), ext_fields={
            "indexLastUpdateTimestamp": index.last_timestamp, "indexLastUpdatePhyoffset": index.last_phys})


__all__ = ["MessageQuery"]
