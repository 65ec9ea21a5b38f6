"""Who may connect to a server and what they may send.

ACL accounts and remote-address lists (``plain_acl.yml``), the access
decision per request class (``access``), the gate that applies it between
the reactor and a server's handlers (``gate``), and the TLS settings and
SSL contexts of servers and clients (``tls_config``, ``tls_context``).
Request signatures themselves are part of the wire (``remoting.acl``). It
imports the wire and the server runtime.
"""
