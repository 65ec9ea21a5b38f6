"""What runs a remoting server, whatever it serves: one job, the process and its connections.

The reactor that multiplexes every connection on one trio task, its
acceptor, read admission, idle sweep and pause detection, the connection
and memory bounds, TLS on the server's connections (the session, the gate
that applies ``tls.server.mode``, the reactor's side of it), log files,
bounded reads of the files a setting names, rate-limited logging, the
request meter and the ``/metrics`` endpoint, and the entry point both
servers share. It imports only the wire (``remoting``).
"""
