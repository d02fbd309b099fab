# syntax=docker/dockerfile:1
# gpu-admission: the admission service. Build from the repository root:
#   docker build -t gpu-admission:0.1.0 .
# The Python version is the one the project is tested with; pin the base by
# digest too (python:3.11.7-slim-bookworm@sha256:...) in a registry you control.

# -- builder: the project's wheel and the wheels of its runtime dependencies.
FROM python:3.11.7-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY webhook ./webhook
# Shipped in the wheel for `gpu-admission install` (pyproject's force-include).
COPY deploy/base ./deploy/base
# The dependencies at the exact versions of the lock, as CI tests them.
RUN pip wheel --wheel-dir /wheels -c requirements.lock .

# -- runtime: the wheels installed, nothing else of the build.
FROM python:3.11.7-slim-bookworm
# What the image is, for registries and scanners (OCI image annotations): the version is
# the package's; a build gives the revision it was made from (--build-arg REVISION=...).
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpu-admission" \
      org.opencontainers.image.description="Kubernetes admission webhooks that put GPU workloads on the right nodes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    XDG_CACHE_HOME=/tmp/cache
# Only from the wheels the builder made (--no-index): the project and its
# runtime dependencies. The bind mount keeps the wheels out of the image.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels gpu-admission
# Numeric, so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
# The Deployment runs as the same user (deploy/base/deployment.yaml).
USER 65532:65532
EXPOSE 8443
# Kubernetes probes /healthz and /readyz over HTTPS: no HEALTHCHECK.
ENTRYPOINT ["gpu-admission"]
# Without a certificate, serve makes a development one under $XDG_CACHE_HOME.
# The Deployment replaces these args with the mounted policy and certificate.
CMD ["serve", "--host", "0.0.0.0", "--port", "8443"]
