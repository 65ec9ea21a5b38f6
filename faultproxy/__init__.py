"""A TCP fault proxy on trio: named paths (listen -> upstream) with network faults, driven over HTTP.

Its one job is to stand between two programs and break the network between them on purpose:
refuse connections, blackhole a stream, add latency, limit bandwidth, reset live connections, and
heal. It knows nothing of RocketMQ: a broker (ours or Apache's), a NameServer or a client is only an
address to it. The vocabulary and its bounds are :mod:`faultproxy.faults` and
:mod:`faultproxy.limits`; the data path :mod:`faultproxy.link` and :mod:`faultproxy.path`; the control
endpoint :mod:`faultproxy.control` over :mod:`faultproxy.httpwire`; the program ``mqfaultproxy``
:mod:`faultproxy.cli`; and the client library the rest of the toolkit uses, :mod:`faultproxy.client`.
docs/faultproxy.md is the reference.
"""
