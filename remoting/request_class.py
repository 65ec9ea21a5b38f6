"""The five classes every request code of our servers belongs to.

Each server's ``request_classes`` module sorts its codes into them; the
access rules (:mod:`security.access`) decide on the class, not the code,
and the request meter (:mod:`server_runtime.metering`) labels latency by
it. Kept with the wire because it is a property of a request code, which
both of those packages read and neither owns.
"""

from __future__ import annotations

import enum


class RequestClass(enum.Enum):
    ROUTE_READ = "route-read"
    CLIENT = "client"
    BROKER_CONTROL = "broker-control"
    ADMIN_READ = "admin-read"
    ADMIN_WRITE = "admin-write"
