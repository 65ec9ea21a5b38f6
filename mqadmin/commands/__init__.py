"""mqadmin's commands, one module per Apache tools/command group (topic, cluster, namesrv, broker, message,
consumer, connection, offset, stats) and one per group of ours (watch, localcluster, scenario, fanout).

Each module parses options, calls :mod:`mqadmin.client` (or :mod:`mqadmin.localcluster`), renders with
:mod:`mqadmin.output`, and has a ``register(app)``. Modules here import no other command module, only
the shared :mod:`.options` (in) and :mod:`.results` (out).
"""
