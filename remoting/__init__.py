"""The RocketMQ wire: what goes in a frame and how it is encoded, and a client that sends one.

A sans-IO frame codec (``codec``), the request and response codes
(``codes``), the command model (``command``), the JSON bodies in the forms
Java's fastjson writes and reads (``bodies``, ``register_body``,
``admin_bodies``, ``fastjson``, ``mqjson``), Java ``.properties`` text,
request builders and signatures (``requests``, ``acl``), and the trio
client transport (``transport``). Shared by every program, so all of them
speak exactly the same bytes; it imports none of our other packages.
"""
