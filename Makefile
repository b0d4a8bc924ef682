# Strand — one entry point for setting up, running, testing and measuring.
# Every target installs what it needs first, so a fresh clone needs only
# python3 (with venv and pip), make and git.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := etcd-server

.PHONY: setup system-deps run test test-fast lint bench proto clean help

help:
	@echo "make run    - show the log engine working (the local cluster arrives with the next issue)"
	@echo "make test   - install everything and run the whole test suite"
	@echo "make lint   - ruff and mypy"
	@echo "make bench  - log engine benchmark, JSON on stdout (bench/log_bench.py)"
	@echo "make proto  - regenerate the gRPC code in strand/v1 from proto/"

$(STAMP): pyproject.toml
	@echo ">>> creating the Python virtual environment in $(VENV) and installing Strand with its dev tools"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

# Debian packages the services and integration tests need (etcd for metadata).
system-deps:
	@if ! command -v etcd >/dev/null 2>&1; then \
		echo ">>> installing Debian packages: $(APT_PACKAGES) (apt-get; needs root or sudo)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); \
	fi

run: setup
	@$(PY) -m strand.log.demo

test: setup system-deps
	@echo ">>> running the test suite"
	@$(PY) -m pytest -q

test-fast: setup system-deps
	@$(PY) -m pytest -q -m "not slow"

lint: setup
	@$(VENV)/bin/ruff check strand bench tests
	@$(VENV)/bin/mypy

proto: setup
	@echo ">>> regenerating strand/v1 from proto/strand/v1/*.proto (grpcio-tools pinned in pyproject.toml)"
	@$(PY) -m grpc_tools.protoc -I proto --python_out=. --pyi_out=. --grpc_python_out=. proto/strand/v1/*.proto

bench: setup
	@$(PY) bench/log_bench.py --json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
