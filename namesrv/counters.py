"""What the NameServer counts about its routing work, for its metrics (:mod:`namesrv.metrics`).

Plain integers, kept whether or not metrics are served: each is bumped once
per registration, removal or refusal, never per route query, so they cost
nothing measurable. Every label set is fixed here, so no value from the
wire ever becomes a label.
"""

from __future__ import annotations

from server_runtime.metering import LatencyHistogram

#: REGISTER_BROKER outcomes. ``applied``: routes changed; ``unchanged``: only the
#: broker's liveness was refreshed; ``refused_bound``: a configured bound said no
#: (maxBrokers, maxBrokersPerConnection, registerBody*); ``refused_auth``: the
#: access gate said no (counted by the request meter, see namesrv.metrics);
#: ``failed``: anything else (a bad header, a CRC mismatch, a body that does not parse).
REGISTRATION_RESULTS = ("applied", "unchanged", "refused_bound", "refused_auth", "failed")
#: Why a broker left the table.
REMOVAL_REASONS = ("connection_closed", "expired", "unregistered")
#: Requests (and connections) refused by a configured bound, by the bound's name.
LIMITS = (
    "connections",  # serverMaxConnections: the connection was closed at accept
    "frame_size",  # frameMaxLength: a frame announced more; its connection was closed
    "max_brokers",  # maxBrokers
    "max_brokers_per_connection",  # maxBrokersPerConnection
    "register_body",  # registerBodyMaxBytes, registerBodyMaxInflatedBytes, registerBodyMaxTopics, ...
    "max_topics",  # maxTopics: a registration or topic creation that would pass it
    "topic_list_size",  # a topic list that would not fit frameMaxLength
    "kv_size",  # kvKeyMaxBytes, kvValueMaxBytes, kvNamespaceMaxBytes, kvTotalMaxBytes
    "config_update_size",  # configUpdateMaxBytes
)


class NamesrvCounters:
    """Registrations by outcome (with their handling time), removals by reason, refusals by bound."""

    def __init__(self) -> None:
        self.registrations = dict.fromkeys(REGISTRATION_RESULTS, 0)
        self.registration_seconds = {result: LatencyHistogram() for result in REGISTRATION_RESULTS}
        self.removals = dict.fromkeys(REMOVAL_REASONS, 0)
        self.refusals = dict.fromkeys(LIMITS, 0)

    def registered(self, result: str, seconds: float) -> None:
        self.registrations[result] += 1  # a KeyError here is a bug: the label set is fixed
        self.registration_seconds[result].observe(seconds)

    def removed(self, reason: str, count: int = 1) -> None:
        self.removals[reason] += count

    def refused(self, limit: str) -> None:
        self.refusals[limit] += 1
