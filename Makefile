# Everything a new user needs: `make run` and `make test` set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/mqnamesrv

test: $(VENV)/.installed
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) bench/namesrv_bench.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
