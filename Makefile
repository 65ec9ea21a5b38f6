# Everything a new user needs: `make run` and `make test` set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run stop test interop prometheus bench fuzz clean

# Core install (trio, typer, rich, ...): enough to run a cluster.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $@

# Test extras on top (pytest, hypothesis, psutil, pyspark, matplotlib).
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# The main job: a local cluster (2 NameServers, 2 broker groups) that keeps running after make returns.
# Run again while it runs, it says so and succeeds (--reuse).
run: $(VENV)/.installed
	@$(VENV)/bin/mqadmin start --reuse
	@echo "The cluster keeps running in the background. Inspect it: $(VENV)/bin/mqadmin clusterList"
	@echo "Stop it:                                                   make stop   (or $(VENV)/bin/mqadmin stop)"

stop: $(VENV)/.installed
	$(VENV)/bin/mqadmin stop

# The interop suite's own programs (tests/interop/harness_build.py): the Java harness against
# RocketMQ 4.9.7 and 5.3.3 (Maven, jars cached in ~/.m2), the Go client program (Go module cache)
# and the loopback bind shim. Needs a JDK 17, Maven, Go and a C compiler; says which one is missing.
interop: $(VENV)/.installed-test
	$(PY) -m tests.interop.harness_build

# A real Prometheus server for the metrics tests (tests/test_metrics_prometheus.py): Debian's package,
# installed where it is missing (as root, or through passwordless sudo), its service left stopped; the
# tests start the binary themselves on loopback. Fails, saying what to do, if it cannot be installed.
prometheus:
	@sh .ci/install-prometheus

# Three workers, each test file on one of them (its module fixtures shared): most tests wait on real
# processes, so on two cores three keep the CPU about 90 % busy (a clean-clone CI run here: pytest 1476 s with
# two workers, 1191 s with three, every test passing); TEST_WORKERS=0 runs them in this process. The 40 slowest
# tests are listed at the end, to keep CI under its 25 minutes.
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test interop prometheus
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=40

bench: $(VENV)/.installed-test
	$(PY) bench/namesrv_bench.py

# The wire fuzzer's long mode: 1,000,000 frames per server, both servers side by side, 16 connections
# each (bounded by 2 hours per server; about 25-40 minutes on a quiet 2-core machine).
fuzz: $(VENV)/.installed-test
	$(PY) -m tests.fuzz --frames 1000000 --seconds 7200 --workers 16 --seed $${SEED:-$$(date +%s)}

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
