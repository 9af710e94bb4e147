# Two entry points for a newcomer: `make run` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# Tests that start no process of ours: run on both cores (pytest-xdist); the rest run one at a time.
UNIT   := not integration and not clients and not chaos and not hostile
# Keep byte-compiled modules (__pycache__/, ignored by git) even where the environment sets
# PYTHONDONTWRITEBYTECODE: without them every pytest collection recompiles the tree (~10 s) and
# every broker and controller a test starts recompiles what it imports (~0.4 s / ~0.2 s of CPU).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test lint unit integration bench clean

$(STAMP): pyproject.toml setup.py storage/_record_walk.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## run: a local cluster (3 controllers, 3 brokers) on 127.0.0.1 until Ctrl-C
run: $(STAMP)
	$(BIN)/pykraft dev --data-dir data/dev

## test: lint, type-check, then every test suite: unit and simulation on two workers, then integration,
## clients, chaos and hostile one at a time
test: $(STAMP) lint
	bash .ci/install-kcat.sh
	bash .ci/install-kafkajs.sh
	bash .ci/install-sarama.sh
	bash .ci/install-chromium.sh
	bash .ci/install-nftables.sh
	$(BIN)/pytest -n 2 -m "$(UNIT)" $(PYTEST_ARGS)
	$(BIN)/pytest -m "not ($(UNIT))" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

unit: $(STAMP)
	$(BIN)/pytest -n 2 -m "$(UNIT)" $(PYTEST_ARGS)

## bench: every benchmark (minutes each; each ends with one JSON line of figures)
BENCHES := storage quorum produce_fetch secure_produce replication transactions spark_export cleaner console peers failover scale
bench: $(STAMP)
	bash .ci/install-nats.sh
	for b in $(BENCHES); do $(BIN)/python -m bench.$$b || exit 1; done

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
