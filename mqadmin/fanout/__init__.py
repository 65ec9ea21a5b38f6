"""``mqadmin fanout``: thousands of simulated producers spread over Spark (or plain processes).

Modules: :mod:`.partition` (what one partition runs), :mod:`.metrics`
(mergeable results), :mod:`.spark` and :mod:`.multiproc` (the two engines),
:mod:`.runner` (the driver), :mod:`.report` (table, JSON, plot). Nothing here
imports pyspark or matplotlib until they are needed.
"""


class FanoutError(Exception):
    """A fan-out run could not be set up or did not finish; the message is one line."""


class FanoutUsageError(FanoutError):
    """An option value (or a combination of options) is wrong: a usage error, exit status 2."""
