# Two commands on a fresh machine: `make demo` runs the quickstart, `make test` the tests.
# Both create .venv and install what they need first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-ir bench bench-auto fuzz lint clean setup

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

# three workers on two cores: the multi-process tests wait on their processes, and a
# third worker fills that time (14.5 min against 17 with two)
test: $(STAMP)
	$(PY) -m pytest -n 3 -m "not slow" tests

# the long sweeps `make test` leaves out (marked slow)
test-slow: $(STAMP)
	$(PY) -m pytest -n 3 -m slow tests

# the IR-level tests only (the propagation corpus, layering): seconds, no XLA compile
test-ir: $(STAMP)
	$(PY) -m pytest -q -n 0 tests/ir

bench: $(STAMP)
	$(PY) -m bench.run

# automatic sharding against the hand strategies, compiled (README: Automatic sharding)
bench-auto: $(STAMP)
	$(PY) -m bench.auto_compare

# the differential fuzzer: N random programs (default 500) from SEED, repros in fuzz-failures/
N ?= 500
SEED ?= 0
fuzz: $(STAMP)
	$(PY) -m fuzz --n $(N) --seed $(SEED)

lint: $(STAMP)
	$(PY) -m pip install --quiet ruff
	$(VENV)/bin/ruff check shardc tests examples bench fuzz

clean:
	rm -rf $(VENV) build *.egg-info
