"""Issue 11's reproductions against a running ``mqnamesrv`` (items 1, 3, 4, 6, 7, 9 and extras).

Each function returns the cases to run as (id, item, what, attack) tuples;
an attack talks to the server over real TCP and returns an
:class:`~hostile_harness.Outcome` (what the server answered, and the
issue's own checks for that case). The harness measures stall, fresh
client, RSS and log around it.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib

from hostile_harness import MIB, Case, Client, Outcome, Server, answer_text, frame

from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig, TopicRouteData
from remoting.codec import encode
from remoting.codes import NAMESPACE_ORDER_TOPIC_CONFIG, RequestCode, ResponseCode
from remoting.command import request

CLUSTER = "DefaultCluster"
#: The issue's 643-byte frame: an extFields value nested 300 deep.
DEEP_FRAME = frame(b'{"code":105,"extFields":{"topic":' + b"[" * 300 + b"]" * 300 + b"}}")


def broker_ext(name: str = "hostile-a", addr: str = "127.0.0.1:10911", **extra: object) -> dict[str, object]:
    ext: dict[str, object] = {"brokerName": name, "brokerAddr": addr, "clusterName": CLUSTER, "brokerId": 0,
                              "haServerAddr": "127.0.0.1:10912", "enableActingMaster": False}
    ext.update(extra)
    return ext


def register(name: str, addr: str, topics: list[TopicConfig], **kw: object) -> object:
    return rq.register_broker(cluster=CLUSTER, broker_name=name, broker_addr=addr, broker_id=0,
                              topics=[TopicConfig("TBW102", 8, 8, 7), *topics], data_version=DataVersion(1, 1), **kw)


def timed_call(server: Server, req: object, timeout: float = 30.0) -> tuple[object, float]:
    with Client(server.addr, timeout=timeout) as c:
        start = time.monotonic()
        resp = c.call(req, timeout)  # type: ignore[arg-type]
        return resp, time.monotonic() - start


def refused_quickly(server: Server, req: object, want: int, remark_part: str, within: float = 1.0) -> Outcome:
    """Send one request; PASS needs the wanted code, remark text and an answer within ``within`` s."""
    resp, took = timed_call(server, req)
    return Outcome(
        f"{answer_text(resp)} in {took * 1000:.0f} ms",  # type: ignore[arg-type]
        {f"answered code {want}": resp.code == want,  # type: ignore[attr-defined]
         f"remark names '{remark_part}'": remark_part in (resp.remark or ""),  # type: ignore[attr-defined]
         f"answered within {within} s": took < within},
        {"answer_ms": round(took * 1000, 1)},
    )


# --------------------------------------------------------------------------
# item 1


def deep_frame(server: Server) -> Outcome:
    with Client(server.addr) as c:
        c.send(DEEP_FRAME)
        closed = c.closed_by_server()
    return Outcome("connection closed by the server" if closed else "connection left open",
                   {"bad connection closed": closed})


# --------------------------------------------------------------------------
# item 3


def escaped_quotes(n_bytes: int) -> bytes:
    return b'"' + b'\\"' * ((n_bytes - 1) // 2)


def query_data_version_quotes(server: Server, size: int) -> Outcome:
    req = rq.query_data_version(cluster="c", broker_name="b", broker_addr="127.0.0.1:1", broker_id=0,
                                data_version=DataVersion(1, 1))
    req.body = escaped_quotes(size)
    return refused_quickly(server, req, ResponseCode.SYSTEM_ERROR, "JSON", within=0.5)


def config_continuations(server: Server) -> Outcome:
    body = b"a\\\n" * 400_000
    return refused_quickly(server, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body), ResponseCode.SYSTEM_ERROR,
                           "configUpdateMaxBytes")


def _item(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _bomb(mib: int, prefix: bytes = b"", block: bytes = b"\0" * MIB) -> bytes:
    squeezer = zlib.compressobj(9)
    parts = [squeezer.compress(prefix)]
    parts.extend(squeezer.compress(block) for _ in range((mib * MIB) // len(block)))
    return b"".join(parts) + squeezer.flush()


def register_bomb(server: Server, structured: bool) -> Outcome:
    if structured:  # a valid start, then 200,000 topic items of ~1.2 KB: 232 MiB inflated
        item = _item(b"T" * 1200 + b" 8 8 6 SINGLE_TAG {}")
        body = _bomb(232, _item(DataVersion(1, 1).encode()) + struct.pack(">i", 200_000), item * 1000)
    else:
        body = _bomb(232)
    out = refused_quickly(server, request(RequestCode.REGISTER_BROKER, broker_ext(compressed=True), body),
                          ResponseCode.SYSTEM_ERROR, "inflates past" if structured else "")
    out.figures["frame_bytes"] = len(body)
    out.rss_limited = True
    return out


def compressed_topics(count: int) -> bytes:
    items = b"".join(_item(b"T%07d 8 8 6 SINGLE_TAG {}" % i) for i in range(count))
    raw = _item(DataVersion(1, 1).encode()) + struct.pack(">i", count) + items + _item(b"[]") + struct.pack(">i", 0)
    return zlib.compress(raw, 6)


def million_topics_compressed(server: Server) -> Outcome:
    body = compressed_topics(1_000_000)
    out = refused_quickly(server, request(RequestCode.REGISTER_BROKER, broker_ext(compressed=True), body),
                          ResponseCode.SYSTEM_ERROR, "more than the limit of 200000")
    out.figures["frame_bytes"] = len(body)
    return out


def json_register_body(entries: bytes) -> bytes:
    return (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
            b'"topicConfigTable":{' + entries + b"}}}")


def million_topics_json(server: Server) -> Outcome:
    """The suspect: 1,000,000 tiny topics as plain JSON near the frame limit (14 MB)."""
    body = json_register_body(b",".join(b'"T%07d":{}' % i for i in range(1_000_000)))
    out = refused_quickly(server, request(RequestCode.REGISTER_BROKER, broker_ext(), body), ResponseCode.SYSTEM_ERROR,
                          "")
    out.figures["frame_bytes"] = len(body)
    out.rss_limited = True
    return out


def json_bomb(server: Server, code: int, shape: bytes) -> Outcome:
    """A 15 MB JSON body of millions of tiny containers (or strings) to a request that parses JSON."""
    body = b"[" + shape * 5_000_000 + b"0]"
    ext = broker_ext() if code in (RequestCode.REGISTER_BROKER, RequestCode.QUERY_DATA_VERSION) else {"topic": "T"}
    out = refused_quickly(server, request(code, ext, body), ResponseCode.SYSTEM_ERROR, "")
    out.figures["body_bytes"] = len(body)
    out.rss_limited = True
    return out


def mapping_entries(server: Server, entries: int = 1_000_000) -> Outcome:
    """The suspect: one static-topic mapping whose currIdMap has 1,000,000 entries (12 MB)."""
    ids = b",".join(b'"%d":%d' % (i, i) for i in range(entries))
    mapping = b'{"bname":"map-x","topic":"MapT","totalQueues":1,"currIdMap":{' + ids + b"}}"
    body = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
            b'"topicConfigTable":{"TBW102":{"perm":7},"MapT":{"perm":6}},"topicQueueMappingInfoMap":{"MapT":'
            + mapping + b"}}}")
    out = refused_quickly(server, request(RequestCode.REGISTER_BROKER, broker_ext("map-x", "127.0.0.1:13911"), body),
                          ResponseCode.SYSTEM_ERROR, "currIdMap")
    out.figures["body_bytes"] = len(body)
    out.rss_limited = True
    return out


def many_brokers(server: Server, count: int = 100_000) -> Outcome:
    """The suspect: one connection registers 100,000 brokers of distinct names (pipelined)."""
    topics = [TopicConfig("ManyTopic", 1, 1, 6)]
    frames = [encode(register(f"many-{i:06d}", f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:10911", topics))
              for i in range(count)]
    codes: dict[int, int] = {}
    with Client(server.addr, timeout=60) as c:
        start = time.monotonic()
        for i in range(0, count, 1000):
            c.send(b"".join(frames[i : i + 1000]))
            for _ in range(min(1000, count - i)):
                code = c.read(60).code
                codes[code] = codes.get(code, 0) + 1
        took = time.monotonic() - start
        peak = server.rss.peak
        info = c.call(rq.cluster_info(), 60)
    time.sleep(0.5)  # the connection closed: its brokers leave
    return Outcome(
        f"answers by code {codes} in {took:.1f} s; cluster info {len(info.body)} B; RSS after close "
        f"{server.rss.latest / 1e6:.0f} MB",
        {}, {"registered": codes.get(0, 0), "rss_peak_mb": round(peak / 1e6, 1),
             "cluster_info_bytes": len(info.body)}, rss_limited=True,
    )


def java_100k_uncompressed(server: Server) -> Outcome:
    """Not an attack: a 100,000-topic Java broker with compressedRegister=false (its default).

    Its stall is issue 12's (the apply path); reported here as a figure, judged only on success."""
    topics = [TopicConfig(f"T{i:06d}", 8, 8, 6) for i in range(100_000)]
    req = register("java-100k", "127.0.0.1:30911", topics)
    with Client(server.addr, timeout=60) as c:
        start = time.monotonic()
        resp = c.call(req, 60)
        took = time.monotonic() - start
        ok = resp.code == ResponseCode.SUCCESS
        route = c.call(rq.get_route("T099999"), 10)
    return Outcome(f"{answer_text(resp)} in {took * 1000:.0f} ms; route of T099999: code {route.code}",
                   {"registered": ok, "route served": route.code == ResponseCode.SUCCESS},
                   {"body_bytes": len(req.body), "answer_ms": round(took * 1000, 1)})  # type: ignore[attr-defined]


# --------------------------------------------------------------------------
# item 4


def slow_frames(server: Server, connections: int = 200, seconds: float = 8.0) -> Outcome:
    """200 connections each declaring a 16 MiB frame and sending it 64 KiB at a time every 50 ms."""
    frame_len = 16 * MIB
    header = b'{"code":105,"extFields":{"topic":"T"}}'
    prefix = struct.pack(">II", frame_len - 4, len(header)) + header
    chunk = b"\0" * (64 * 1024)
    socks: list[socket.socket] = []
    sent: list[int] = []
    began = time.monotonic()
    try:
        for _ in range(connections):
            sock = socket.create_connection(server.addr, timeout=5)
            sock.setblocking(False)
            socks.append(sock)
            sent.append(0)
        while time.monotonic() - began < seconds:
            for i, sock in enumerate(socks):
                if sent[i] >= frame_len:
                    continue
                try:
                    sent[i] += sock.send(prefix if sent[i] == 0 else chunk[: frame_len - sent[i]])
                except (BlockingIOError, InterruptedError):
                    pass  # not read now: waiting for room in the read budget
                except OSError:
                    sent[i] = frame_len
                try:
                    while sock.recv(1 << 16):
                        pass
                except OSError:
                    pass
            time.sleep(0.05)
    finally:
        for sock in socks:
            sock.close()
    return Outcome(f"{connections} connections sent {sum(sent) / MIB:.0f} MiB in {seconds:.0f} s",
                   {}, {"sent_mib": round(sum(sent) / MIB)}, rss_limited=True)


def register_many(c: Client, name: str, addr: str, names: list[str]) -> object:
    topics = [TopicConfig(t, 4, 4, 6) for t in names]
    return c.call(register(name, addr, topics, compressed=True), 120)


def pipelining(server: Server, requests: int = 300, hold: float = 5.0) -> Outcome:
    """A 100,000-topic table, then 300 pipelined GET_ALL_TOPIC_LIST and no reading for 5 s."""
    with Client(server.addr, timeout=120) as broker:  # held: closing it drops the topics
        resp = register_many(broker, "pipe-a", "127.0.0.1:40911", [f"BenchTopic-{i:07d}" for i in range(100_000)])
        answer = broker.call(rq.all_topics(), 30)
        server.rss.reset_peak()
        began = time.monotonic()
        attacker = socket.create_connection(server.addr, timeout=5)
        attacker.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        try:
            attacker.sendall(encode(rq.all_topics()) * requests)
            time.sleep(hold)
            peak = server.rss.peak
        finally:
            attacker.close()
        time.sleep(3.0)
        after = server.rss.latest
    return Outcome(
        f"register {answer_text(resp)}; all-topics answer {len(answer.body)} B; {requests} asked, never read",  # type: ignore[arg-type]
        {"RSS after close < 300 MB": after / 1e6 < 300},
        {"answer_bytes": len(answer.body), "rss_peak_while_held_mb": round(peak / 1e6, 1),
         "rss_after_close_mb": round(after / 1e6, 1)},
        rss_limited=True,
        window_start=began,
    )


def all_topics_past_frame(server: Server) -> Outcome:
    """The suspect: two brokers with 110,000 topics of 120 characters each: the list passes 16 MiB."""
    pad = "x" * 110
    with Client(server.addr, timeout=120) as a, Client(server.addr, timeout=120) as b:
        register_many(a, "wide-a", "127.0.0.1:50911", [f"A{pad}{i:07d}" for i in range(110_000)])
        register_many(b, "wide-b", "127.0.0.1:50921", [f"B{pad}{i:07d}" for i in range(110_000)])
        time.sleep(1.0)  # the registrations' own stall (issue 12) is over before the case begins
        server.rss.reset_peak()
        with Client(server.addr, timeout=30) as c:
            start = time.monotonic()
            resp = c.call(rq.all_topics(), 30)
            took = time.monotonic() - start
        end = time.monotonic() + 0.05
        time.sleep(0.1)
    closed = time.monotonic()  # both brokers' connections closed: 220,000 topics leave the table
    time.sleep(1.0)
    close_stall = server.probe.window(closed, time.monotonic())["max_ms"]
    size = len(encode(resp))  # type: ignore[arg-type]
    return Outcome(
        f"{answer_text(resp)} in {took * 1000:.0f} ms (frame {size} B)",
        {"answer fits the 16 MiB frame limit": size <= 16 * MIB},
        {"answer_frame_bytes": size, "answer_ms": round(took * 1000, 1),
         "stall_ms_when_the_220k_topic_brokers_disconnect": close_stall},
        rss_limited=True,
        window_start=start,
        window_end=end,
    )


def kv_big_values(server: Server) -> Outcome:
    """Two 9 MiB PUTs into ORDER_TOPIC_CONFIG, then a broker registers."""
    with Client(server.addr, timeout=30) as c:
        puts = [c.call(rq.put_kv(NAMESPACE_ORDER_TOPIC_CONFIG, f"Big{i}", "v" * (9 * MIB)), 30) for i in range(2)]
        reg = c.call(register("kv-a", "127.0.0.1:60911", [TopicConfig("KvTopic", 4, 4, 6)]), 30)
        route = c.call(rq.get_route("KvTopic"), 10)
    return Outcome(
        f"PUTs: {', '.join(answer_text(p) for p in puts)}; register answer {len(reg.body)} B",
        {"9 MiB PUTs refused": all(p.code == ResponseCode.SYSTEM_ERROR for p in puts),
         "register answer < 16 MiB": reg.code == ResponseCode.SUCCESS and len(reg.body) < 16 * MIB,
         "route served": route.code == ResponseCode.SUCCESS},
        rss_limited=True,
    )


# --------------------------------------------------------------------------
# item 6


def route_poisoning(server: Server) -> Outcome:
    deep = b'{"bname":"poison-x","topic":"PoisonST","currIdMap":' + b"[" * 990 + b"]" * 990 + b"}"
    body = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
            b'"topicConfigTable":{"TBW102":{"perm":7},"PoisonST":{"perm":6,"readQueueNums":4,"writeQueueNums":4}},'
            b'"topicQueueMappingInfoMap":{"PoisonST":' + deep + b"}}}")
    with Client(server.addr) as good:
        good.call(register("poison-a", "127.0.0.1:11911", [TopicConfig("PoisonST", 4, 4, 6)]))
        with Client(server.addr) as stranger:
            resp = stranger.call(request(RequestCode.REGISTER_BROKER, broker_ext("poison-x", "127.0.0.1:11921"), body))
        time.sleep(0.3)
        route = good.call(rq.get_route("PoisonST"))
    served = route.code == ResponseCode.SUCCESS
    data = TopicRouteData.decode(route.body) if served else None
    brokers = [b.broker_name for b in data.broker_datas] if data else []
    return Outcome(
        f"stranger: {answer_text(resp)}; route afterwards: code {route.code}, brokers {brokers}",
        {"stranger refused": resp.code == ResponseCode.SYSTEM_ERROR,
         "route served by the other broker": served and brokers == ["poison-a"],
         "no mapping left": data is not None and not data.topic_queue_mapping_by_broker},
    )


# --------------------------------------------------------------------------
# item 7


def data_version_counter(server: Server) -> Outcome:
    body = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":'
            b'"99999999999999999999999","timestamp":1},"topicConfigTable":{"TBW102":{"perm":7},"T":{"perm":6}}}}')
    with Client(server.addr) as c:
        reg = c.call(request(RequestCode.REGISTER_BROKER, broker_ext("dv-a", "127.0.0.1:12911"), body))
        q = c.call(request(RequestCode.QUERY_DATA_VERSION, broker_ext("dv-a", "127.0.0.1:12911"),
                           b'{"counter":"99999999999999999999999","timestamp":1}'))
    return Outcome(
        f"register: {answer_text(reg)}; query: {answer_text(q)}",
        {"both refused with a range remark": all(
            r.code == ResponseCode.SYSTEM_ERROR and "out of range for a Java long" in (r.remark or "") for r in (reg, q))},
    )


# --------------------------------------------------------------------------
# item 9


def garbage_code_log(server: Server) -> Outcome:
    header = b'{"code":"' + b"9" * (8 * MIB) + b'x"}'
    before = server.log_size()
    with Client(server.addr, timeout=30) as c:
        c.send(frame(header))
        closed = c.closed_by_server(10)
    time.sleep(0.2)
    grown = server.log_size() - before
    return Outcome(f"connection closed: {closed}; log grew {grown} B",
                   {"connection closed": closed, "log grew < 1 KB": grown < 1024}, {"log_growth_bytes": grown})


def refusals_at_limit(server: Server, attempts: int = 500) -> Outcome:
    """Run against a NameServer started with serverMaxConnections=4 (2 held here, the probe is one)."""
    held = [socket.create_connection(server.addr, timeout=5) for _ in range(3)]
    before = server.log_size()
    refused = 0
    try:
        for _ in range(attempts):
            with Client(server.addr, timeout=5) as c:
                refused += c.closed_by_server(2)
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    new = server.log_since(before)
    lines = new.count(b"refusing connection")
    return Outcome(f"{refused} of {attempts} refused; 'refusing connection' lines: {lines}",
                   {"all refused": refused == attempts, "one log line": lines <= 1},
                   {"refusal_log_lines": lines, "log_bytes": len(new)})


# --------------------------------------------------------------------------


def cases(s: Server) -> list[Case]:
    out = [Case("1-deep-extfields-namesrv", 1, "extFields value nested 300 deep (643 B frame)", s, lambda: deep_frame(s))]
    for kb in (16, 32, 64):
        out.append(Case(f"3-escaped-quotes-{kb}k", 3, f"QUERY_DATA_VERSION body '\"' + '\\\\\"'*n, {kb} KB", s,
                        lambda kb=kb: query_data_version_quotes(s, kb * 1024)))  # type: ignore[misc]
    return out + [
        Case("3-config-continuations", 3, "UPDATE_NAMESRV_CONFIG 'a\\\\\\n' x 400000 (1.2 MB)", s,
             lambda: config_continuations(s)),
        Case("3-register-bomb-structured", 3, "compressed REGISTER_BROKER inflating to 232 MiB of topic items", s,
             lambda: register_bomb(s, True)),
        Case("3-register-bomb-zeros", 3, "compressed REGISTER_BROKER inflating to 232 MiB of zeros", s,
             lambda: register_bomb(s, False)),
        Case("3-million-topics-compressed", 3, "2.6 MB compressed REGISTER_BROKER of 1,000,000 topics", s,
             lambda: million_topics_compressed(s)),
        Case("3x-million-topics-json", 3, "14 MB plain-JSON REGISTER_BROKER of 1,000,000 topics", s,
             lambda: million_topics_json(s)),
        Case("3x-json-bomb-register-lists", 3, "15 MB REGISTER_BROKER body of 5,000,000 empty arrays", s,
             lambda: json_bomb(s, RequestCode.REGISTER_BROKER, b"[],")),
        Case("3x-json-bomb-dataversion-objects", 3, "15 MB QUERY_DATA_VERSION body of 5,000,000 empty objects", s,
             lambda: json_bomb(s, RequestCode.QUERY_DATA_VERSION, b"{},")),
        Case("3x-json-bomb-registertopic-strings", 3, "15 MB REGISTER_TOPIC_IN_NAMESRV body of 5,000,000 strings", s,
             lambda: json_bomb(s, RequestCode.REGISTER_TOPIC_IN_NAMESRV, b'"",')),
        Case("3x-mapping-currIdMap-1M", 3, "12 MB REGISTER_BROKER: one mapping with a 1,000,000-entry currIdMap", s,
             lambda: mapping_entries(s)),
        Case("4x-many-brokers", 4, "one connection registers 100,000 brokers of distinct names", s,
             lambda: many_brokers(s)),
        Case("4-kv-9mib-values", 4, "two 9 MiB PUT_KV_CONFIG into ORDER_TOPIC_CONFIG, then REGISTER_BROKER", s,
             lambda: kv_big_values(s)),
        Case("4-slow-frames", 4, "200 connections x 16 MiB frame, 64 KiB per 50 ms, 8 s", s, lambda: slow_frames(s)),
        Case("4-pipelining-no-read", 4, "300 pipelined GET_ALL_TOPIC_LIST (100,000 topics), never read, 5 s", s,
             lambda: pipelining(s)),
        Case("4x-all-topics-past-frame", 4, "GET_ALL_TOPIC_LIST over 220,000 topics of 118 chars (> 16 MiB)", s,
             lambda: all_topics_past_frame(s)),
        Case("6-route-poisoning", 6, "mapping nested 990 deep from a stranger, who then leaves", s,
             lambda: route_poisoning(s)),
        Case("7-data-version-counter", 7, "dataVersion.counter 99999999999999999999999, then QUERY_DATA_VERSION", s,
             lambda: data_version_counter(s)),
        Case("9-garbage-code-8mib", 9, "one 8 MiB frame with a garbage code", s, lambda: garbage_code_log(s)),
        Case("12-java-100k-uncompressed", 3, "(figure, not an attack) a 100,000-topic broker, plain JSON body", s,
             lambda: java_100k_uncompressed(s), stall_applies=False),
    ]
