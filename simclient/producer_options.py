"""What a simulated producer is configured with, and what it refuses to send before sending anything.

:class:`ProducerOptions` holds Java's ``DefaultMQProducer`` settings with
their defaults; :func:`message_problem` is the Java client's
``Validators.checkMessage`` and ``checkTopic``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from remoting.codes import DEFAULT_TOPIC
from simclient.fault import LATENCY_MAX_MS, NOT_AVAILABLE_MS

#: Validators.checkMessage / checkTopic of the Java client: checked before anything is sent.
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
TOPIC_MAX_LENGTH = 127
_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def message_problem(topic: str, body: bytes) -> str | None:
    """Why the Java client would refuse this message before sending it, or None."""
    if not topic or not topic.strip():
        return "the specified topic is blank"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"the specified topic is longer than topic max length {TOPIC_MAX_LENGTH}"
    if not _TOPIC_CHARS.match(topic):
        return f"the specified topic[{topic}] contains illegal characters"
    if not body:
        return "the message body is empty"
    if len(body) > MAX_MESSAGE_SIZE:
        return f"the message body size over max value, MAX: {MAX_MESSAGE_SIZE}"
    return None


@dataclass(frozen=True)
class ProducerOptions:
    namesrv_addrs: tuple[str, ...]
    group: str = "sim_producer_group"
    poll_name_server_interval: float = 30.0  # s, like pollNameServerInterval (30000 ms)
    send_timeout: float = 3.0  # s, like sendMsgTimeout
    retry_times_when_send_failed: int = 2
    send_latency_fault_enable: bool = False  # ClientConfig.sendLatencyEnable: false in 5.x
    # --- additions beyond the shared contract (all with Java's defaults) ---
    heartbeat_broker_interval: float = 30.0  # s, heartbeatBrokerInterval; 0 = no heartbeats
    mq_client_api_timeout: float = 3.0  # s, route query timeout (mqClientApiTimeout)
    send_msg_max_timeout_per_request: float | None = None  # s, sendMsgMaxTimeoutPerRequest (-1 = off)
    retry_another_broker_when_not_store_ok: bool = False
    default_topic: str = DEFAULT_TOPIC  # createTopicKey
    default_topic_queue_nums: int = 4
    latency_max_ms: tuple[int, ...] = LATENCY_MAX_MS
    not_available_duration_ms: tuple[int, ...] = NOT_AVAILABLE_MS
    namesrv_failover_in_call: bool = True
    unregister_on_close: bool = True
    compress_over: bool = True  # zlib-compress bodies >= 4 KiB like the Java producer
    use_tls: bool = False  # ClientConfig.useTLS (-Dtls.enable): run_load's own pool speaks TLS, test mode

    def __post_init__(self) -> None:
        if not self.namesrv_addrs:
            raise ValueError("at least one NameServer address is needed")
        if isinstance(self.namesrv_addrs, str):
            raise TypeError("namesrv_addrs must be a tuple of host:port strings, not one string")
        if self.send_timeout <= 0 or self.mq_client_api_timeout <= 0:
            raise ValueError("timeouts must be positive")
        if self.poll_name_server_interval <= 0:
            raise ValueError("poll_name_server_interval must be positive")
        if self.retry_times_when_send_failed < 0:
            raise ValueError("retry_times_when_send_failed must be >= 0")


__all__ = ["MAX_MESSAGE_SIZE", "TOPIC_MAX_LENGTH", "ProducerOptions", "message_problem"]
