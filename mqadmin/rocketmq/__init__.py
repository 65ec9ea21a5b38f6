"""Apache's Java RocketMQ as a dependency: its published jars resolved by Maven into a cache
(:mod:`.artifacts`) and the JVM command lines that run them on a laptop (:mod:`.jvm`).

No Typer, no Rich: the local cluster, scenarios, benchmarks and tests all use it.
"""
