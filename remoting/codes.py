"""Numeric constants of the RocketMQ remoting protocol.

The numbers are the ones Apache RocketMQ puts on the wire (RequestCode,
ResponseCode, LanguageCode, MQVersion ordinals); see the protocol reference.
"""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """Request codes this project sends or serves."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    GET_CONSUMER_RUNNING_INFO = 307
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    VIEW_BROKER_STATS_DATA = 315
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    GET_TOPIC_CONFIG = 351
    GET_SUBSCRIPTIONGROUP_CONFIG = 352
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    GET_BROKER_HA_STATUS = 907
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053


class ResponseCode(enum.IntEnum):
    """Response codes (RemotingSysResponseCode and ResponseCode)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    INVALID_PARAMETER = 29
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    FLOW_CONTROL = 215


class SerializeType(enum.IntEnum):
    """Header serialization, the high byte of the frame's header-length word."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(enum.IntEnum):
    """Sender language; JSON headers carry the name, binary headers the byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


LANGUAGE_BY_NAME: dict[str, LanguageCode] = {c.name: c for c in LanguageCode}


class Version(enum.IntEnum):
    """Ordinals of Java's MQVersion.Version that change behaviour on the wire."""

    V3_0_11 = 37
    V3_1_8_SNAPSHOT = 62  # below it a broker will not call a consumer (AdminBrokerProcessor.callConsumer)
    V4_6_0 = 333
    V4_9_4 = 401
    V4_9_7 = 407
    V5_0_0 = 413
    V5_3_3 = 479


#: The version we claim in every command we build (Apache RocketMQ 5.3.3).
CURRENT_VERSION = int(Version.V5_3_3)

#: Java's default frame limit (com.rocketmq.remoting.frameMaxLength).
DEFAULT_FRAME_MAX_LENGTH = 16 * 1024 * 1024

#: Flag bits of the command header.
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2

#: Permission bits (PermName).
PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

#: Topic sys flags (TopicSysFlag).
FLAG_UNIT = 1
FLAG_UNIT_SUB = 2

MASTER_ID = 0
DEFAULT_TOPIC = "TBW102"
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


#: Version ordinals below this follow no pattern (3.0.0 alphas and betas, 3.x gaps); from it on the
#: enum is regular: V3_9_1_SNAPSHOT, V3_9_1, V3_9_2_SNAPSHOT, ... V5_9_9, then HIGHER_VERSION.
_REGULAR_FROM = 194
_HIGHER_VERSION = 612
_EARLY = (
    "V3_0_0_SNAPSHOT V3_0_0_ALPHA1 V3_0_0_BETA1 V3_0_0_BETA2 V3_0_0_BETA3 V3_0_0_BETA4 V3_0_0_BETA5 "
    "V3_0_0_BETA6_SNAPSHOT V3_0_0_BETA6 V3_0_0_BETA7_SNAPSHOT V3_0_0_BETA7 V3_0_0_BETA8_SNAPSHOT V3_0_0_BETA8 "
    "V3_0_0_BETA9_SNAPSHOT V3_0_0_BETA9 V3_0_0_FINAL"
).split()


def _early_releases() -> list[str]:
    """3.0.1-3.0.15, 3.1.0-3.2.9, then 3.3.1-3.8.9 (no .0): each a SNAPSHOT and a release."""
    numbers = [(0, p) for p in range(1, 16)] + [(m, p) for m in (1, 2) for p in range(10)]
    numbers += [(m, p) for m in range(3, 9) for p in range(1, 10)]
    return [name for m, p in numbers for name in (f"V3_{m}_{p}_SNAPSHOT", f"V3_{m}_{p}")]


_EARLY_NAMES = _EARLY + _early_releases()


def version_desc(ordinal: int) -> str:
    """MQVersion.getVersionDesc: the name of a client's version ordinal (e.g. 479 -> ``V5_3_3``)."""
    if ordinal >= _HIGHER_VERSION:
        return "HIGHER_VERSION"
    if ordinal < 0:
        return str(ordinal)
    if ordinal < _REGULAR_FROM:
        return _EARLY_NAMES[ordinal]
    number = 391 + (ordinal - _REGULAR_FROM) // 2  # the digits major, minor, patch
    name = f"V{number // 100}_{number // 10 % 10}_{number % 10}"
    return name if (ordinal - _REGULAR_FROM) % 2 else name + "_SNAPSHOT"
