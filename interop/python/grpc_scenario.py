"""A scenario's RocketMQ 5 client in one process: PyPI's ``rocketmq-python-client`` through a Proxy.

mqadmin scenario run starts it for ``client: grpc-python`` (mqadmin.scenario.grpc_clients), with the
same line protocol as our Java and Go programs: one JSON object per line on stdout, ``go`` and ``stop``
on stdin, the end of stdin a stop too.

    grpc_scenario.py produce --endpoint H:P --topic T [--topic T2] --producers N --rate R --seconds S
                             [--size 256] [--timeout-ms 3000]
    grpc_scenario.py consume --endpoint H:P --group G --topic T [--expression *] [--api push|simple]
                             [--threads 20] [--delay-ms 0] [--failure-rate 0] [--invisible-s 15]

``produce`` starts N producers (each a client of its own), prints {"event":"ready"}, and on ``go`` sends
from N threads at R messages/s each for S seconds: one {"event":"send",...} line per send with, when
stored, "status", "broker", "queue", "offset" and "msgId" (the id the client gave it, which consumers
see), else "error"; then {"event":"done"}.

``consume`` prints ready, starts its consumer on ``go`` and prints one {"event":"consumed",...} line per
message handed to the application: "msgId", "topic", "handle" (the receipt handle, which names the broker,
queue and offset), "attempt" (the delivery attempt), "outcome" (``retry`` when the application failed it
at --failure-rate: a push consumer answers FAILURE, a simple consumer leaves it to its invisible time),
and for a simple consumer "ack" (``ok`` or the error). A simple consumer's receive that fails prints
{"event":"receive","error":...}. ``stop`` shuts the client down (at most 8 s) and prints {"event":"stopped","closed":BOOL}.
Every loop is bounded by --seconds or by ``stop``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from typing import Any

CLOSE_SECONDS = 8.0
START_ATTEMPTS = 5
_OUT = threading.Lock()
_STOP = threading.Event()


def emit(**fields: Any) -> None:
    line = json.dumps(fields, separators=(",", ":"))
    with _OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def error_text(exc: BaseException) -> str:
    """The exception and its causes, ``Class: message <- Class: message`` (bounded)."""
    parts = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 5:
        parts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return " <- ".join(parts)[:2000]


def wait_for_stdin_word(word: str) -> bool:
    """Read stdin until ``word`` (True) or its end (False)."""
    for line in sys.stdin:
        if line.strip() == word:
            return True
    return False


def watch_stop() -> None:
    """After ``go``: ``stop`` or the end of stdin stops everything."""
    wait_for_stdin_word("stop")
    _STOP.set()


def started(make: Any, what: str) -> Any:
    """``make()`` started; a start that failed (a starved machine: settings or routes not in time) is tried
    again, :data:`START_ATTEMPTS` in all, each failure a {"event":"start","error":..} line."""
    for attempt in range(1, START_ATTEMPTS + 1):
        client = make()
        try:
            client.startup()
            return client
        except Exception as exc:  # noqa: BLE001 - reported, then tried again
            emit(event="start", what=what, attempt=attempt, error=error_text(exc))
            if attempt == START_ATTEMPTS:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def config(args: argparse.Namespace) -> Any:
    from rocketmq.v5.client import ClientConfiguration, Credentials

    # whole seconds: the client passes it where Python wants an int
    return ClientConfiguration(args.endpoint, Credentials(), request_timeout=max(1, -(-args.timeout_ms // 1000)))


# -- producing ---------------------------------------------------------------------------------


def produce(args: argparse.Namespace) -> None:
    from rocketmq.v5.producer import Producer

    producers = []
    try:
        for _ in range(args.producers):
            producers.append(started(lambda: Producer(config(args), tuple(args.topic)), "producer"))
        emit(event="ready")
        if not wait_for_stdin_word("go"):
            return
        threading.Thread(target=watch_stop, daemon=True).start()
        end = time.monotonic() + args.seconds
        body = os.urandom(args.size)
        senders = [threading.Thread(target=send_loop, args=(i, p, args, body, end)) for i, p in enumerate(producers)]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        emit(event="done")
    finally:
        for producer in producers:
            try:
                producer.shutdown()
            except Exception:  # noqa: BLE001 - shutting down: nothing more to report
                pass


def send_loop(index: int, producer: Any, args: argparse.Namespace, body: bytes, end: float) -> None:
    period = 1.0 / args.rate
    next_at = time.monotonic() + random.random() * period
    n = 0
    while not _STOP.is_set():
        wait = next_at - time.monotonic()
        if wait > 0:
            _STOP.wait(wait)
        elif -wait > 1.0:
            next_at = time.monotonic()  # more than a second behind: start over, do not burst
        if next_at >= end or _STOP.is_set():
            return
        send(index, producer, args.topic[n % len(args.topic)], body)
        n += 1
        next_at += period


def send(index: int, producer: Any, topic: str, body: bytes) -> None:
    from rocketmq.v5.model import Message

    msg = Message()
    msg.topic, msg.body = topic, body
    line: dict[str, Any] = {"event": "send", "p": index, "t": time.time() * 1000.0, "topic": topic}
    begin = time.monotonic()
    try:
        receipt = producer.send(msg)
        broker, _, queue = str(receipt.message_queue).rsplit(".", 2)  # the client's "broker.topic.queueId"
        line.update(status="SEND_OK", broker=broker, queue=int(queue), offset=receipt.offset,
                    msgId=receipt.message_id)
    except Exception as exc:  # noqa: BLE001 - every failure is a record
        line["error"] = error_text(exc)
    line["ms"] = (time.monotonic() - begin) * 1000.0
    emit(**line)


# -- consuming ---------------------------------------------------------------------------------


def consumed(view: Any, outcome: str, **more: Any) -> None:
    born = view.born_timestamp
    emit(event="consumed", t=time.time() * 1000.0, msgId=view.message_id, topic=view.topic,
         handle=view.receipt_handle, attempt=view.delivery_attempt, outcome=outcome,
         **({"storeMs": born} if isinstance(born, int) else {}), **more)


def handle(view: Any, args: argparse.Namespace) -> bool:
    """The application's work on one message: whether it succeeded."""
    if args.delay_ms > 0:
        time.sleep(args.delay_ms / 1000.0)
    return random.random() >= args.failure_rate


def consume(args: argparse.Namespace) -> None:
    from rocketmq.v5.model import FilterExpression

    emit(event="ready")
    if not wait_for_stdin_word("go"):
        return
    subscription = {t: FilterExpression(args.expression) for t in args.topic}
    make = push_consumer if args.api == "push" else simple_consumer
    consumer = started(lambda: make(args, subscription), "consumer")
    worker = None
    if args.api == "simple":
        worker = threading.Thread(target=receive_loop, args=(consumer, args), daemon=True)
        worker.start()
    wait_for_stdin_word("stop")
    _STOP.set()
    if worker is not None:
        worker.join(args.timeout_ms / 1000.0 + 5.0)
    closer = threading.Thread(target=consumer.shutdown, daemon=True)  # bounded: it waits for receives in flight
    closer.start()
    closer.join(CLOSE_SECONDS)
    emit(event="stopped", closed=not closer.is_alive())


def push_consumer(args: argparse.Namespace, subscription: dict[str, Any]) -> Any:
    from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer

    class Listener(MessageListener):
        def consume(self, message: Any) -> Any:
            if handle(message, args):
                consumed(message, "ok")
                return ConsumeResult.SUCCESS
            consumed(message, "retry")
            return ConsumeResult.FAILURE

    return PushConsumer(config(args), args.group, Listener(), subscription, consumption_thread_count=args.threads)


def simple_consumer(args: argparse.Namespace, subscription: dict[str, Any]) -> Any:
    from rocketmq.v5.consumer import SimpleConsumer

    return SimpleConsumer(config(args), args.group, subscription, await_duration=5)


def receive_loop(consumer: Any, args: argparse.Namespace) -> None:
    while not _STOP.is_set():
        try:
            views = list(consumer.receive(16, int(args.invisible_s)))
        except Exception as exc:  # noqa: BLE001 - a failed receive is reported and tried again
            emit(event="receive", t=time.time() * 1000.0, error=error_text(exc))
            _STOP.wait(0.5)
            continue
        emit(event="receive", t=time.time() * 1000.0, n=len(views))
        for view in views:
            if _STOP.is_set():
                return
            if not handle(view, args):
                consumed(view, "retry")  # left to its invisible time: it comes again
                continue
            try:
                consumer.ack(view)
                consumed(view, "ok", ack="ok")
            except Exception as exc:  # noqa: BLE001 - the broker may be gone: it comes again
                consumed(view, "ok", ack=error_text(exc))


def main() -> None:
    parser = argparse.ArgumentParser(prog="grpc_scenario.py")
    parser.add_argument("mode", choices=("produce", "consume"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--group", default="")
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--timeout-ms", type=int, default=3000)
    parser.add_argument("--expression", default="*")
    parser.add_argument("--api", choices=("push", "simple"), default="push")
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    parser.add_argument("--invisible-s", type=float, default=15.0)
    args = parser.parse_args()
    try:
        produce(args) if args.mode == "produce" else consume(args)
    finally:
        sys.stdout.flush()
        os._exit(0)  # the client's own threads (gRPC, schedulers) must not keep the process alive


if __name__ == "__main__":
    main()
