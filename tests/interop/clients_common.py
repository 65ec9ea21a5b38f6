"""What the client interop tests send and expect: messages with tags, keys and user properties,
a tag expression, and the check that what arrived is exactly what was sent (minus filtered tags)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from tests.interop.java_procs import LineProcess, json_lines
from tests.mqadmin_procs import mqadmin

# body, tag, keys, user properties
MESSAGES = [
    ("a-0", "TagA", "ka0 kshared", {"color": "red", "n": "1"}),
    ("b-0", "TagB", "kb0", {"color": "blue"}),
    ("c-0", "TagC", "kc0", {"shape": "round", "note": "x y=z"}),
    ("a-1", "TagA", "ka1", {"color": "green", "city": "Zürich"}),
    ("b-1", "TagB", "kb1", {}),
]
EXPRESSION = "TagA || TagC"
EXPECTED = [m for m in MESSAGES if m[1] in ("TagA", "TagC")]

# Properties the clients and brokers set themselves (not the sender's user properties).
SYSTEM_PROPERTIES = {
    "TAGS", "KEYS", "UNIQ_KEY", "WAIT", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "CLUSTER",
    "TRACE_ON", "MSG_REGION", "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC", "REQUEST_ID", "DELAY",
    "POP_CK", "1ST_POP_TIME", "INNER_NUM", "INNER_BASE", "bname",
}


def message_specs() -> list[str]:
    """The messages in the harness programs' -msg/--msg format."""
    specs = []
    for body, tag, keys, props in MESSAGES:
        fields = [f"body={body}", f"tag={tag}", f"keys={keys}"] + [f"prop.{k}={v}" for k, v in props.items()]
        specs.append(";".join(fields))
    return specs


def create_topic(namesrv: str, cluster: str, topic: str, wait: float = 90.0) -> None:
    """The topic on every master of the cluster (our mqadmin), so a consumer can start first.

    A broker starved on a busy machine may not be registered yet (or again, after its registration
    expired): the cluster unknown to the NameServer is asked again until ``wait`` seconds have passed.
    """
    deadline = time.monotonic() + wait
    while True:
        done = mqadmin("updateTopic", "-n", namesrv, "-c", cluster, "-t", topic, "-r", "4", "-w", "4")
        if done.returncode == 0 or "is not known to the NameServer" not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert done.returncode == 0, done.stderr


def check_received(received: list[dict[str, Any]], topic: str) -> None:
    """Exactly the TagA/TagC messages, each with its tag, keys and user properties."""
    by_body = {line["body"]: line for line in received}
    assert sorted(by_body) == sorted(m[0] for m in EXPECTED), [line["body"] for line in received]
    for body, tag, keys, props in EXPECTED:
        got = by_body[body]
        assert got["topic"] == topic
        assert got["tags"] == tag
        assert got["keys"] == keys
        user = {k: v for k, v in got["properties"].items() if k not in SYSTEM_PROPERTIES}
        assert user == props, (body, got["properties"])


def check_sent(lines: list[dict[str, Any]]) -> None:
    """Every message sent, in order, SEND_OK (the Go client prints its status as 0)."""
    sent = [line for line in lines if line.get("event") == "sent"]
    assert [line["body"] for line in sent] == [m[0] for m in MESSAGES], lines
    assert {line["status"] for line in sent} in ({"SEND_OK"}, {0}), lines


def exchange(consumer: LineProcess, produce: list[str], env: dict[str, str], cwd: Path, topic: str) -> None:
    """The consumer ready first, then the producer run to its end: every message sent SEND_OK, and
    exactly the TagA/TagC ones received intact. The consumer is stopped, pass or fail."""
    try:
        consumer.wait_for("ready")
        done = subprocess.run(produce, capture_output=True, text=True, timeout=180, env=env, check=False, cwd=cwd)
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        check_sent(json_lines(done.stdout))
        assert consumer.finish() == 0, consumer.lines
        check_received(consumer.received(), topic)
    finally:
        consumer.kill()
