"""Issue 11's reproductions against a running ``mqbroker-stub`` (items 1, 2, 3, 4, 7, 10 and extras).

Same shape as :mod:`hostile_namesrv`: each case attacks over real TCP and
returns an :class:`~hostile_harness.Outcome`; the harness measures stall,
fresh client, RSS and log around it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hostile_harness import MIB, Case, Client, Outcome, Server, answer_text
from hostile_namesrv import deep_frame, escaped_quotes

from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, request

FAULT = 9000
I32, I64 = 2**31, 2**63
UNIQ = "7F0000010A2B18B4AAC2476FE7A60000"


def send_v2(topic: str, body: bytes, *, serialize: SerializeType = SerializeType.JSON, **overrides: object
            ) -> RemotingCommand:
    fields: dict[str, object] = {"a": "PG", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0,
                                 "g": int(time.time() * 1000), "h": 0, "i": f"UNIQ_KEY\x01{UNIQ}\x02", "j": 0,
                                 "k": "false", "l": 16, "m": "false"}
    fields.update(overrides)
    return request(RequestCode.SEND_MESSAGE_V2, fields, body, serialize_type=serialize)


# --------------------------------------------------------------------------
# item 2


def fault_code_70000(server: Server) -> Outcome:
    with Client(server.addr) as c:
        fault = c.call(request(FAULT, {"action": "reject", "code": "70000"}))
        sends = [c.call(send_v2("FaultTopic", b"x", serialize=SerializeType.ROCKETMQ)) for _ in range(3)]
        c.call(request(FAULT, {"action": "clear"}))
    return Outcome(
        f"fault: {answer_text(fault)}; 3 binary-header sends: {[s.code for s in sends]}",
        {"fault refused": fault.code == ResponseCode.INVALID_PARAMETER,
         "sends stored": all(s.code == ResponseCode.SUCCESS for s in sends)},
    )


# --------------------------------------------------------------------------
# item 3 and JSON bodies


def heartbeat_quotes(server: Server) -> Outcome:
    with Client(server.addr) as c:
        start = time.monotonic()
        resp = c.call(request(RequestCode.HEART_BEAT, body=escaped_quotes(64 * 1024)))
        took = time.monotonic() - start
    return Outcome(f"{answer_text(resp)} in {took * 1000:.0f} ms",
                   {"refused": resp.code != ResponseCode.SUCCESS, "answered within 0.5 s": took < 0.5},
                   {"answer_ms": round(took * 1000, 1)})


def body_bomb(server: Server, code: int, body: bytes, ext: dict[str, object] | None = None) -> Outcome:
    with Client(server.addr, timeout=30) as c:
        start = time.monotonic()
        resp = c.call(request(code, ext or {}, body), 30)
        took = time.monotonic() - start
    return Outcome(f"{answer_text(resp)} in {took * 1000:.0f} ms",
                   {"refused": resp.code != ResponseCode.SUCCESS, "answered within 1 s": took < 1.0},
                   {"body_bytes": len(body), "answer_ms": round(took * 1000, 1)}, rss_limited=True)


# --------------------------------------------------------------------------
# item 4


def flood(server: Server, topic: str, queues: int, size: int, count: int, window: int = 32) -> tuple[int, float]:
    """``count`` sends of ``size`` bytes, ``window`` in flight; (answered SUCCESS, seconds)."""
    body = b"m" * size
    ok = sent = answered = 0
    start = time.monotonic()
    with Client(server.addr, timeout=60) as c:
        while answered < count:
            if time.monotonic() - start > 120:
                raise TimeoutError(f"flood timed out after {answered} answers")
            while sent < count and sent - answered < window:
                req = send_v2(topic, body, e=sent % queues)
                req.opaque = sent + 1
                c.send(req)
                sent += 1
            resp = c.read(60)
            answered += 1
            ok += resp.code == ResponseCode.SUCCESS
    return ok, time.monotonic() - start


def offsets(server: Server, topic: str, queue_id: int) -> tuple[int, int]:
    with Client(server.addr) as c:
        lo = c.call(request(RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id}))
        hi = c.call(request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}))
    return int(lo.ext("offset") or -1), int(hi.ext("offset") or -1)


def store_flood(server: Server, topic: str, queues: int, size: int, count: int) -> Outcome:
    ok, took = flood(server, topic, queues, size, count)
    lo, hi = offsets(server, topic, 0)
    return Outcome(f"{ok} of {count} sends stored in {took:.1f} s; queue 0 offsets min {lo} max {hi}",
                   {"all sends answered SUCCESS": ok == count, "oldest dropped (min offset moved)": lo > 0},
                   {"sent_mib": round(count * size / MIB), "seconds": round(took, 1)}, rss_limited=True)


def auto_created_bound(server: Server, topics: int = 1100) -> Outcome:
    codes: dict[int, int] = {}
    with Client(server.addr) as c:
        for i in range(topics):
            resp = c.call(send_v2(f"AutoBound{i:05d}", b"x"))
            codes[resp.code] = codes.get(resp.code, 0) + 1
    refused = codes.get(ResponseCode.TOPIC_NOT_EXIST, 0)
    return Outcome(f"answers by code: {codes}", {"some sends to new topics refused past 1024": refused > 0},
                   {"created": codes.get(0, 0), "refused": refused})


# --------------------------------------------------------------------------
# item 7 and numeric headers


def numbers_beyond_java(server: Server) -> Outcome:
    cases = {"sysFlag": {"f": I32}, "flag": {"h": I32}, "reconsumeTimes": {"j": I32}, "bornTimestamp": {"g": I64}}
    got: dict[str, str] = {}
    with Client(server.addr) as c:
        for name, override in cases.items():
            resp = c.call(send_v2("RangeTopic", b"x", **override))
            got[name] = answer_text(resp)
            if resp.code != ResponseCode.SYSTEM_ERROR or "out of range for a Java" not in (resp.remark or ""):
                got[name] += " (NOT refused)"
    return Outcome("; ".join(f"{k}: {v}" for k, v in got.items()),
                   {"all four refused by name": not any("NOT" in v for v in got.values())})


def malformed_numbers(server: Server) -> Outcome:
    """The suspect: text that is no number at all, where Java's header decoding throws."""
    reqs = {
        "V2 queueId=abc": send_v2("RangeTopic", b"x", e="abc"),
        "V2 sysFlag=1e3": send_v2("RangeTopic", b"x", f="1e3"),
        "pull queueOffset=x": request(RequestCode.PULL_MESSAGE, {"consumerGroup": "CG", "topic": "RangeTopic",
                                                                 "queueId": 0, "queueOffset": "x", "maxMsgNums": 1,
                                                                 "sysFlag": 4, "commitOffset": 0,
                                                                 "suspendTimeoutMillis": 0, "subVersion": 0}),
        "max offset queueId=''": request(RequestCode.GET_MAX_OFFSET, {"topic": "RangeTopic", "queueId": ""}),
    }
    got = {}
    with Client(server.addr) as c:
        for name, req in reqs.items():
            got[name] = c.call(req)
    return Outcome("; ".join(f"{k}: {answer_text(v)}" for k, v in got.items()),
                   {"all refused SYSTEM_ERROR": all(r.code == ResponseCode.SYSTEM_ERROR for r in got.values())})


def admin_numbers(server: Server) -> Outcome:
    """The suspect: numeric fields of the new admin requests (222's are int/long/long in Java)."""
    reqs = {
        "222 timestamp=2^63": request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                      {"topic": "RangeTopic", "group": "CG", "timestamp": I64, "isForce": "true"}),
        "222 queueId=2^31": request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                    {"topic": "RangeTopic", "group": "CG", "timestamp": 0, "queueId": I32}),
        "222 offset=2^63": request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                   {"topic": "RangeTopic", "group": "CG", "timestamp": 0, "offset": I64}),
    }
    got = {}
    with Client(server.addr) as c:
        for name, req in reqs.items():
            got[name] = c.call(req)
    return Outcome("; ".join(f"{k}: {answer_text(v)}" for k, v in got.items()),
                   {"all refused with a range remark": all(r.code == ResponseCode.SYSTEM_ERROR and "out of range"
                                                           in (r.remark or "") for r in got.values())})


# --------------------------------------------------------------------------
# deferred work: a send-back that cannot be stored when its delay is up


def send_back_unstorable(server: Server) -> Outcome:
    """The suspect: CONSUMER_SEND_MSG_BACK whose retry put fails 1 s later, on the broker's timer
    (a %RETRY% topic over 127 bytes, or properties over 32767 bytes once RETRY_TOPIC is added)."""
    answers = []
    with Client(server.addr) as c:
        c.call(request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "SendBackTopic", "readQueueNums": 1,
                                                             "writeQueueNums": 1, "perm": 6}))
        for group, props in (("G" * 130, ""), ("CG", "KEYS\x01" + "k" * 32_680 + "\x02")):
            sent = c.call(send_v2("SendBackTopic", b"x", i=f"UNIQ_KEY\x01{UNIQ}\x02{props}"))
            if sent.code != ResponseCode.SUCCESS:
                return Outcome(f"the message to send back was not stored: {answer_text(sent)}", {"message stored": False})
            phys = int((sent.ext("msgId") or "0")[-16:], 16)
            answers.append(c.call(request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                          {"group": group, "offset": phys, "delayLevel": 1, "originMsgId": UNIQ,
                                           "originTopic": "SendBackTopic", "maxReconsumeTimes": 16})))
        time.sleep(2.0)  # delay level 1 is 1 s: the deferred puts are due
    return Outcome("; ".join(answer_text(a) for a in answers),
                   {"refused when asked": all(a.code != ResponseCode.SUCCESS for a in answers)})


# --------------------------------------------------------------------------
# item 10


def topics_file(server: Server, store: Path, topics: int = 3000) -> Outcome:
    """Sends that each auto-create a topic kept in topics.json: cost per send early and at 3,000."""
    lat: list[float] = []
    with Client(server.addr) as c:
        for i in range(topics):
            start = time.perf_counter()
            resp = c.call(send_v2(f"FileTopic{i:05d}", b"x"))
            lat.append(time.perf_counter() - start)
            if resp.code != ResponseCode.SUCCESS:
                return Outcome(f"send {i} answered {answer_text(resp)}", {"all sends stored": False})
    time.sleep(1.0)
    saved = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    on_disk = sum(1 for name in saved if name.startswith("FileTopic"))
    first, last = sorted(lat[:200])[100] * 1000, sorted(lat[-200:])[100] * 1000
    return Outcome(
        f"median send {first:.2f} ms over the first 200 topics, {last:.2f} ms at {topics}; {on_disk} on disk after 1 s",
        {"every topic on disk within 1 s": on_disk == topics, "send cost flat (< 2 ms at 3,000)": last < 2.0},
        {"median_ms_first": round(first, 2), "median_ms_last": round(last, 2), "max_ms": round(max(lat) * 1000, 1)},
    )


# --------------------------------------------------------------------------


def cases(s: Server, store: Path) -> list[Case]:
    return [
        Case("1-deep-extfields-broker", 1, "extFields value nested 300 deep (643 B frame)", s, lambda: deep_frame(s)),
        Case("2-fault-code-70000", 2, "fault 9000 reject code 70000, then ROCKETMQ-header SEND_MESSAGE_V2", s,
             lambda: fault_code_70000(s)),
        Case("3-heartbeat-escaped-quotes", 3, "HEART_BEAT body '\"' + '\\\\\"'*n, 64 KB", s, lambda: heartbeat_quotes(s)),
        Case("3x-heartbeat-json-lists", 3, "15 MB HEART_BEAT body of 5,000,000 empty arrays", s,
             lambda: body_bomb(s, RequestCode.HEART_BEAT, b"[" + b"[]," * 5_000_000 + b"0]")),
        Case("3x-subgroup-bad-json", 3, "8 MB UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body that is not JSON", s,
             lambda: body_bomb(s, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b"{" + b'"a":1,' * 1_400_000 + b"x")),
        Case("3x-lockbatch-json-objects", 3, "15 MB LOCK_BATCH_MQ body of 5,000,000 empty objects", s,
             lambda: body_bomb(s, RequestCode.LOCK_BATCH_MQ, b'{"mqSet":[' + b"{}," * 5_000_000 + b"{}]}")),
        Case("4-store-1mib-messages", 4, "2,000 x 1 MiB messages to one queue", s,
             lambda: store_flood(s, "LargeTopic", 1, MIB, 2000)),
        Case("4-store-benchmarktest", 4, "1 GiB of 8 KiB messages over BenchmarkTest's 1,024 queues", s,
             lambda: store_flood(s, "BenchmarkTest", 1024, 8192, 131072)),
        Case("4-auto-created-topics", 4, "sends to 1,100 new topics (maxAutoCreatedTopics 1024)", s,
             lambda: auto_created_bound(s)),
        Case("7-send-numbers-beyond-java", 7, "SEND_MESSAGE_V2 sysFlag/flag/reconsumeTimes 2^31, bornTimestamp 2^63", s,
             lambda: numbers_beyond_java(s)),
        Case("7x-malformed-numbers", 7, "header numbers that are no numbers (abc, 1e3, x, '')", s,
             lambda: malformed_numbers(s)),
        Case("x-send-back-unstorable", 2, "CONSUMER_SEND_MSG_BACK whose deferred retry cannot be stored", s,
             lambda: send_back_unstorable(s)),
        Case("7x-admin-222-numbers", 7, "INVOKE_BROKER_TO_RESET_OFFSET timestamp/offset 2^63, queueId 2^31", s,
             lambda: admin_numbers(s)),
    ]


def file_cases(s: Server, store: Path) -> list[Case]:
    """Run against a broker keeping topics.json (storePathRootDir set, maxAutoCreatedTopics 4000)."""
    return [Case("10-topics-json-3000", 10, "3,000 sends each auto-creating a topic kept in topics.json", s,
                 lambda: topics_file(s, store))]

