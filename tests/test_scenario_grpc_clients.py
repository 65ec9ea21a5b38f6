"""RocketMQ 5 (gRPC) clients as a scenario's load and consumers: the schema and the lines' meaning.

The runs themselves, through Apache's Proxy, are in tests/interop/test_grpc_scenario.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqadmin.scenario import grpc_clients, schema
from mqadmin.scenario.values import ScenarioError

SCN = """\
duration: 5
{cluster}load:
  client: {client}
consumers:
  client: {consumer}
{extra}expect:
  - send_success_rate: 1
"""


def parse(client: str = "grpc-python", consumer: str = "grpc-python", extra: str = "", cluster: str = "") -> schema.Scenario:
    return schema.parse(SCN.format(client=client, consumer=consumer, extra=extra, cluster=cluster), "g.yaml")


def test_grpc_kinds_parse_and_imply_the_proxy() -> None:
    scn = parse("grpc-java", "grpc-java:5.0.7", "  api: simple\n  invisible_time: 3\n")
    assert scn.groups[0].client == "grpc-java:5.0.7"  # the default rocketmq-client-java
    assert (scn.consumers[0].api, scn.consumers[0].invisible_time) == ("simple", 3.0)
    assert scn.cluster.proxy == "5.3.3"  # a gRPC client needs the Proxy: implied
    assert parse(cluster="cluster:\n  proxy: 5.4.0\n").cluster.proxy == "5.4.0"
    assert parse("sim", "sim").cluster.proxy is None  # no Proxy process unless asked or needed


@pytest.mark.parametrize("client, consumer, extra, cluster, message", [
    ("grpc-ruby", "sim", "", "", "g.yaml:3: load.client: must be sim, go, java:VERSION, grpc-python or "
                                 "grpc-java[:VERSION] (e.g. java:5.3.3, grpc-java:5.0.7), got 'grpc-ruby'"),
    ("grpc-java:4.9.7", "sim", "", "", "g.yaml:3: load.client: RocketMQ 4.9.7 has no grpc-client"),
    ("sim", "java:5.3.3", "  api: simple\n", "", "g.yaml:6: consumers.api: simple consumers are RocketMQ 5's"),
    ("sim", "grpc-python", "  invisible_time: 3\n", "", "g.yaml:6: consumers.invisible_time: is a simple consumer's"),
    ("sim", "grpc-java", "  consume_from: first_offset\n", "", "g.yaml:6: consumers.consume_from: not with client "
                                                               "grpc-java:5.0.7: a new POP group starts"),
    ("grpc-python", "sim", "", "cluster:\n  auth: true\n", "g.yaml:3: cluster.proxy: the Proxy the gRPC clients "
                                                           "need cannot be combined with auth or tls yet"),
    ("sim", "sim", "", "cluster:\n  proxy: 4.9.7\n", "g.yaml:3: cluster.proxy: RocketMQ 4.9.7 has no proxy"),
])
def test_bad_grpc_input_is_one_line(client: str, consumer: str, extra: str, cluster: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse(client, consumer, extra, cluster)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_an_unknown_client_kind_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SCN.format(client="grpc-rust", consumer="sim", extra="", cluster=""))
    done = subprocess.run([str(Path(sys.executable).parent / "mqadmin"), "scenario", "run", str(path)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "got 'grpc-rust'" in done.stderr, done.stderr


def test_a_receipt_handle_names_broker_queue_and_offset() -> None:
    assert grpc_clients.handle_fields("0 1795957767567 60000 0 0 broker-b 6 17 998") == ("broker-b", 6, 17)
    assert grpc_clients.handle_fields("not a handle") == ("", -1, -1)
    assert grpc_clients.handle_fields("0 1 2 3 0 broker-a x 1") == ("", -1, -1)


def test_lines_become_the_records_the_verdicts_read() -> None:
    sent = grpc_clients.send_record({"event": "send", "p": 0, "t": 11_000.0, "topic": "T", "status": "SEND_OK",
                                     "broker": "broker-a", "queue": 3, "offset": 5, "msgId": "M1", "ms": 4.0}, 2, 10.0)
    assert (sent.outcome, sent.msg_id, sent.producer, sent.t) == ("ok", "M1", 2, 1.0)
    assert (sent.broker, sent.queue_id) == (None, -1)  # the Proxy chose the broker; the receipt cannot say
    failed = grpc_clients.send_record({"event": "send", "t": 11_000.0, "topic": "T", "ms": 3000.0,
                                       "error": "ClientException: connection refused"}, 0, 10.0)
    assert failed.outcome == "conn_error" and failed.msg_id == ""
    rec = grpc_clients.consume_record({"event": "consumed", "t": 12_500.0, "msgId": "M1", "topic": "T",
                                       "handle": "0 1 60000 0 0 broker-b 2 9", "attempt": 2, "outcome": "ok",
                                       "storeMs": 12_000}, 1, "g", 10.0)
    assert (rec.t, rec.broker, rec.queue_id, rec.queue_offset, rec.msg_id) == (2.5, "broker-b", 2, 9, "M1")
    assert (rec.reconsume_times, rec.latency_ms, rec.outcome) == (1, 500.0, "ok")
