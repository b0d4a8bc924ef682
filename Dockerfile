# The one Strand image: every service, the operator and the storage pod's init step,
# run by name through `strand-service NAME [ARGS...]` (strand/service/by_name.py).
# Build: `make image` (docker or podman). Checked without a container engine by
# tests/unit/test_dockerfile.py (checkov, the user, and a pip install of what the
# build stage copies into a fresh virtualenv).
#
# checkov:skip=CKV_DOCKER_2: no HEALTHCHECK. Kubernetes ignores it and probes each
# service itself (gRPC health on 9090, the operator's /healthz): the chart's
# readiness and liveness probes. One image runs several services on different ports,
# so no single HEALTHCHECK command would be right for all of them.

# ---------------------------------------------------------------------- build stage
# Builds the wheel and installs it with its dependencies into a virtualenv, which
# the final stage copies alone: pip's caches, the build backend and the sources stay
# here. Every dependency ships binary wheels for CPython 3.11 on linux amd64/arm64,
# so no compiler is needed even here.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/strand
WORKDIR /src
# What the package is built from (pyproject names README.md as its readme).
COPY pyproject.toml README.md ./
COPY strand ./strand
COPY services ./services
COPY operator ./operator
RUN /opt/strand/bin/pip install ".[operator]" \
    && /opt/strand/bin/pip uninstall --yes pip setuptools

# ---------------------------------------------------------------------- final stage
FROM python:3.11-slim
ARG STRAND_VERSION=0.1.0
LABEL org.opencontainers.image.title="strand" \
      org.opencontainers.image.description="Strand, a partitioned replicated commit log: its services (controller, gateway, storage, groups, transactions), its Kubernetes operator and the storage pod's rack-from-node init step; run one with: strand-service NAME --help" \
      org.opencontainers.image.version="${STRAND_VERSION}"

# A fixed, non-root uid/gid (10001): the chart's securityContext (runAsUser,
# fsGroup) names the same numbers, and runAsNonRoot can check a numeric USER.
RUN groupadd --system --gid 10001 strand \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/strand \
       --no-create-home --shell /usr/sbin/nologin strand \
    && mkdir -p /var/lib/strand \
    && chown 10001:10001 /var/lib/strand \
    && python -m pip uninstall --yes pip setuptools wheel

COPY --from=build /opt/strand /opt/strand

# Bytecode was compiled at install time, so a read-only root filesystem is fine.
ENV PATH=/opt/strand/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    STRAND_DATA_DIR=/var/lib/strand

USER 10001:10001
WORKDIR /var/lib/strand
# gRPC (every service) and the Prometheus metrics port, as the chart uses them.
EXPOSE 9090 9100
ENTRYPOINT ["strand-service"]
CMD ["--help"]
