"""REGISTER_BROKER planned: a registration read, compared with the table and decided, in slices.

The route table (:mod:`namesrv.routes`) asks this package for a plan and
then writes it itself (``RouteTable.commit``); nothing here changes the
table. The body as it arrived (:mod:`.body`) is cut into chunks
(:mod:`.scan`, the compressed form :mod:`.compact`), the topic changes are
worked out chunk by chunk (:mod:`.topics`), and the registration as a whole
is decided (:mod:`.plan`). docs/registration.md tells the whole path.
"""
