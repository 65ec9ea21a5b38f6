"""Topic attributes and TopicConfig in the text forms Java's admin tools use.

Pure string work, kept apart from the calls so the CLI and the broker
requests agree on one syntax (``+key=value,-key``) and one printout.
"""

from __future__ import annotations

from mqadmin.client.errors import AdminError
from remoting.bodies import TopicConfig, perm_to_string


def parse_attributes(text: str | None) -> dict[str, str]:
    """``+a=b,+c=d,-e`` (AttributeParser.parseToMap: keys keep their sign)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            key, _, value = item.partition("=")
            if not key.startswith("+") or len(key) < 2:
                raise AdminError(f"attribute {item!r}: adding or changing is written +key=value")
        else:
            key, value = item, ""
            if not key.startswith("-") or len(key) < 2:
                raise AdminError(f"attribute {item!r}: deleting is written -key")
        if key in out:
            raise AdminError(f"attribute {key} given twice")
        out[key] = value
    return out


def attributes_text(attrs: dict[str, str]) -> str:
    return ",".join(k if not v else f"{k}={v}" for k, v in attrs.items())


def topic_config_text(tc: TopicConfig) -> str:
    """TopicConfig.toString() of 5.x, which updateTopic prints."""
    attrs = "{" + ", ".join(f"{k}={v}" for k, v in tc.attributes.items()) + "}"
    return (
        f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
        f"writeQueueNums={tc.write_queue_nums}, perm={perm_to_string(tc.perm)}, "
        f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, order={str(tc.order).lower()}, "
        f"attributes={attrs}]"
    )
