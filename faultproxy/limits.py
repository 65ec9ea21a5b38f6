"""Every bound of the fault proxy, in one place (docs/faultproxy.md lists them with their reasons).

The proxy holds at most :data:`CHUNK_BYTES` being read plus :data:`QUEUE_CHUNKS` chunks waiting per
direction of a connection, so a connection holds at most 2 x (1 + 8) x 16 KiB = 288 KiB whatever its
faults; beyond that the proxy stops reading and TCP's own flow control slows the sender
(backpressure, never an unbounded queue). With :data:`MAX_CONNECTIONS` connections that is at most
288 MiB in the worst case, and a few MiB for the local cluster's handful of broker connections.
"""

from __future__ import annotations

#: Bytes read from one side at a time.
CHUNK_BYTES = 16 * 1024
#: Chunks one direction of a connection may hold (read, not yet written: latency, bandwidth, a slow peer).
QUEUE_CHUNKS = 8
#: Paths (listeners) one proxy process serves: the local cluster's largest shape (26 broker groups of
#: 5 brokers, 16 NameServers) needs 2,080 broker->NameServer paths and 130 client paths.
MAX_PATHS = 4096
#: Live connections of one path, unless the path says otherwise (``max_connections``, 1..MAX_CONNECTIONS).
MAX_CONNECTIONS_PER_PATH = 256
#: Live connections of the whole process; an accept beyond either bound is reset at once.
MAX_CONNECTIONS = 1024
#: Toxics (faults) one path may carry at once.
MAX_TOXICS_PER_PATH = 32
#: Seconds allowed to connect to a path's upstream before the accepted connection is reset.
UPSTREAM_CONNECT_SECONDS = 5.0
#: Longest latency or jitter a toxic may add, and longest bandwidth rate, as Toxiproxy's units (ms, KB/s).
MAX_LATENCY_MS = 600_000
MAX_RATE_KBPS = 10_000_000
#: Names of paths and toxics: short, and safe in a URL path segment.
NAME_PATTERN = r"^[A-Za-z0-9._@:-]{1,64}$"

# --- the control endpoint (HTTP/1.1, one request per connection) --------------------------------
#: Control connections served at once; one more is closed at once.
MAX_CONTROL_CONNECTIONS = 16
#: Bytes of a request line plus headers.
MAX_HEAD_BYTES = 8 * 1024
#: Bytes of a request body (a /populate of all 4,096 paths is about 400 KB).
MAX_BODY_BYTES = 1024 * 1024
#: Seconds a control client has to send its whole request.
REQUEST_SECONDS = 10.0
#: After an answer, what the proxy still reads and drops of a client's request before it closes (so an
#: early error answer is not destroyed by a reset): at most this long, and at most this many bytes.
LINGER_SECONDS = 2.0
LINGER_BYTES = 1024 * 1024
