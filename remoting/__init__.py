"""RocketMQ remoting protocol: a sans-IO codec, body models and a trio transport.

Shared by the NameServer, the broker stub and the admin tools so that every
program speaks exactly the same bytes.
"""
