"""Send messages with the C++ RocketMQ client (PyPI ``rocketmq`` 0.4.4) and print one JSON line.

Run as a child process by tests/test_access_cpp_client.py: the client's
native threads and its blocking calls stay out of the test's own process,
and a hang is ended by the test's timeout.

usage: python -m tests.cpp_producer NAMESRV TOPIC COUNT [ACCESS_KEY SECRET_KEY]
"""

from __future__ import annotations

import json
import sys

from rocketmq.client import Message, Producer


def main(argv: list[str]) -> int:
    namesrv, topic, count = argv[0], argv[1], int(argv[2])
    producer = Producer("CppAclGroup", timeout=3000)
    producer.set_namesrv_addr(namesrv)
    if len(argv) >= 5:
        producer.set_session_credentials(argv[3], argv[4], "ALIYUN")
    producer.start()
    results: list[str] = []
    try:
        for i in range(count):
            msg = Message(topic)
            msg.set_keys(f"key-{i}")
            msg.set_tags("acl")
            msg.set_body(f"signed body {i}")
            try:
                results.append(producer.send_sync(msg).status.name)
            except Exception as exc:  # the client's refusal, reported to the test
                results.append(f"error: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        producer.shutdown()
    print(json.dumps({"results": results}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
