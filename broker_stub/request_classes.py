"""Every request code the broker stub serves (or is about to), and its access class.

One table, read by the access gate (:mod:`security.gate`), checked by the
processor whenever a handler is added (a handler without a class is a
start-up error) and meant for per-class metrics labels. A code missing here
is refused while accounts are on (fail closed). Codes without a name in
:class:`remoting.codes.RequestCode` are written as numbers with Java's name.
"""

from __future__ import annotations

from broker_stub.faults import FAULT_CODE
from broker_stub.replication import REPLICATE_CODE
from broker_stub.slave_sync import GET_ALL_CONSUMER_OFFSET
from remoting.codes import RequestCode as R
from remoting.request_class import RequestClass

CLIENT = RequestClass.CLIENT
ADMIN_READ = RequestClass.ADMIN_READ
ADMIN_WRITE = RequestClass.ADMIN_WRITE

#: request code -> class
REQUEST_CLASSES: dict[int, RequestClass] = {
    # producers and consumers: the data path
    R.SEND_MESSAGE: CLIENT,  # 10
    R.PULL_MESSAGE: CLIENT,  # 11
    12: CLIENT,  # QUERY_MESSAGE
    R.QUERY_CONSUMER_OFFSET: CLIENT,  # 14
    R.UPDATE_CONSUMER_OFFSET: CLIENT,  # 15
    R.SEARCH_OFFSET_BY_TIMESTAMP: CLIENT,  # 29
    R.GET_MAX_OFFSET: CLIENT,  # 30
    R.GET_MIN_OFFSET: CLIENT,  # 31
    R.GET_EARLIEST_MSG_STORETIME: CLIENT,  # 32
    R.VIEW_MESSAGE_BY_ID: CLIENT,  # 33
    R.HEART_BEAT: CLIENT,  # 34
    R.UNREGISTER_CLIENT: CLIENT,  # 35
    R.CONSUMER_SEND_MSG_BACK: CLIENT,  # 36
    R.END_TRANSACTION: CLIENT,  # 37
    R.GET_CONSUMER_LIST_BY_GROUP: CLIENT,  # 38
    R.LOCK_BATCH_MQ: CLIENT,  # 41
    R.UNLOCK_BATCH_MQ: CLIENT,  # 42
    R.CHECK_CLIENT_CONFIG: CLIENT,  # 46
    R.SEND_MESSAGE_V2: CLIENT,  # 310
    R.SEND_BATCH_MESSAGE: CLIENT,  # 320
    R.GET_SUBSCRIPTIONGROUP_CONFIG: CLIENT,  # 352, the Proxy's question before each POP
    R.POP_MESSAGE: CLIENT,  # 200050
    R.ACK_MESSAGE: CLIENT,  # 200051
    R.CHANGE_MESSAGE_INVISIBLETIME: CLIENT,  # 200053
    # what tools (and a slave's sync) read
    R.GET_ALL_TOPIC_CONFIG: ADMIN_READ,  # 21
    R.GET_BROKER_CONFIG: ADMIN_READ,  # 26
    R.GET_BROKER_RUNTIME_INFO: ADMIN_READ,  # 28
    GET_ALL_CONSUMER_OFFSET: ADMIN_READ,  # 43
    R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: ADMIN_READ,  # 201
    R.GET_TOPIC_STATS_INFO: ADMIN_READ,  # 202
    R.GET_CONSUMER_CONNECTION_LIST: ADMIN_READ,  # 203
    R.GET_PRODUCER_CONNECTION_LIST: ADMIN_READ,  # 204
    R.GET_CONSUME_STATS: ADMIN_READ,  # 208
    R.QUERY_TOPIC_CONSUME_BY_WHO: ADMIN_READ,  # 300
    R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: ADMIN_READ,  # 305
    307: ADMIN_READ,  # GET_CONSUMER_RUNNING_INFO
    R.VIEW_BROKER_STATS_DATA: ADMIN_READ,  # 315
    317: ADMIN_READ,  # GET_BROKER_CONSUME_STATS
    328: ADMIN_READ,  # GET_ALL_PRODUCER_INFO
    R.GET_TOPIC_CONFIG: ADMIN_READ,  # 351
    907: ADMIN_READ,  # GET_BROKER_HA_STATUS
    # what changes the broker: topics, groups, offsets, config, faults, replication
    R.UPDATE_AND_CREATE_TOPIC: ADMIN_WRITE,  # 17
    R.UPDATE_BROKER_CONFIG: ADMIN_WRITE,  # 25
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: ADMIN_WRITE,  # 200
    R.DELETE_SUBSCRIPTIONGROUP: ADMIN_WRITE,  # 207
    R.DELETE_TOPIC_IN_BROKER: ADMIN_WRITE,  # 215
    R.INVOKE_BROKER_TO_RESET_OFFSET: ADMIN_WRITE,  # 222
    # a consumer runs its listener on a stored message again: a change, whoever asks
    R.CONSUME_MESSAGE_DIRECTLY: ADMIN_WRITE,  # 309
    FAULT_CODE: ADMIN_WRITE,  # 9000, the stub's fault switchboard
    REPLICATE_CODE: ADMIN_WRITE,  # 9010, a slave copying its master's messages
}
