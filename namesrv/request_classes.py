"""Every request code the NameServer serves, and its access class.

One table, read by the access gate (:mod:`security.gate`), checked by the
processor at start (a handler without a class is a start-up error, so no
code is ever served unclassified) and meant for per-class metrics labels.
What each class may do is :mod:`security.access`'s business; a code missing
here is refused while accounts are on (fail closed).
"""

from __future__ import annotations

from namesrv.liveinfo import LIVE_TABLE_CODE
from namesrv.provisional import RESTORED_BROKERS_CODE
from remoting.codes import RequestCode as R
from remoting.request_class import RequestClass

ROUTE_READ = RequestClass.ROUTE_READ
BROKER_CONTROL = RequestClass.BROKER_CONTROL
ADMIN_READ = RequestClass.ADMIN_READ
ADMIN_WRITE = RequestClass.ADMIN_WRITE

#: request code -> class
REQUEST_CLASSES: dict[int, RequestClass] = {
    # what clients ask to find brokers
    R.GET_ROUTEINFO_BY_TOPIC: ROUTE_READ,  # 105
    R.GET_BROKER_CLUSTER_INFO: ROUTE_READ,  # 106
    R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: ROUTE_READ,  # 206
    R.GET_TOPICS_BY_CLUSTER: ROUTE_READ,  # 224
    R.GET_SYSTEM_TOPIC_LIST_FROM_NS: ROUTE_READ,  # 304
    R.GET_UNIT_TOPIC_LIST: ROUTE_READ,  # 311
    R.GET_HAS_UNIT_SUB_TOPIC_LIST: ROUTE_READ,  # 312
    R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: ROUTE_READ,  # 313
    # what a broker sends about itself
    R.REGISTER_BROKER: BROKER_CONTROL,  # 103
    R.UNREGISTER_BROKER: BROKER_CONTROL,  # 104
    R.QUERY_DATA_VERSION: BROKER_CONTROL,  # 322
    R.GET_BROKER_MEMBER_GROUP: BROKER_CONTROL,  # 901
    R.BROKER_HEARTBEAT: BROKER_CONTROL,  # 904
    # what tools read
    R.GET_KV_CONFIG: ADMIN_READ,  # 101
    R.GET_KVLIST_BY_NAMESPACE: ADMIN_READ,  # 219
    R.GET_NAMESRV_CONFIG: ADMIN_READ,  # 319
    LIVE_TABLE_CODE: ADMIN_READ,  # 9001, ours
    RESTORED_BROKERS_CODE: ADMIN_READ,  # 9002, ours
    # what changes the NameServer or its routes
    R.PUT_KV_CONFIG: ADMIN_WRITE,  # 100
    R.DELETE_KV_CONFIG: ADMIN_WRITE,  # 102
    R.WIPE_WRITE_PERM_OF_BROKER: ADMIN_WRITE,  # 205
    R.DELETE_TOPIC_IN_NAMESRV: ADMIN_WRITE,  # 216
    R.REGISTER_TOPIC_IN_NAMESRV: ADMIN_WRITE,  # 217
    R.UPDATE_NAMESRV_CONFIG: ADMIN_WRITE,  # 318
    R.ADD_WRITE_PERM_OF_BROKER: ADMIN_WRITE,  # 327
}
