# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build --target operator -t crimsonbench-operator .
#   docker build --target fio      -t crimsonbench-fio .
# BASE may point at a locally imported Debian bookworm rootfs (see the real-node e2e) where
# no registry is reachable; anywhere else the default pulls debian:bookworm-slim.
ARG BASE=debian:bookworm-slim

# ---------------------------------------------------------------- fio runner
# What the Jobs run: fio with the rbd engine, the rbd/ceph CLIs, lscpu for the topology probe.
FROM ${BASE} AS fio
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      fio ceph-common util-linux procps ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /etc/ceph && chown 167:167 /etc/ceph
# uid/gid 167 is ceph's in Ceph's own images; the Job manifests run as it.
USER 167:167
ENTRYPOINT []

# ---------------------------------------------------------------- operator
FROM ${BASE} AS operator-build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv python3-pip \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN python3 -m venv /opt/crimsonbench \
 && /opt/crimsonbench/bin/pip install --no-cache-dir ".[operator]"

FROM ${BASE} AS operator
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* \
 && echo 'crimsonbench:x:65532:65532::/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'crimsonbench:x:65532:' >> /etc/group
# A passwd entry for the uid: kopf names itself after the user (getpass.getuser()), which
# fails for a uid without one (found by the real-node e2e).
COPY --from=operator-build /opt/crimsonbench /opt/crimsonbench
ENV PATH=/opt/crimsonbench/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CRIMSONBENCH_METRICS_PORT=9464
USER 65532:65532
EXPOSE 8080 9464
# --liveness serves kopf's health probes; JSON logs for log collectors.
ENTRYPOINT ["kopf", "run", "-m", "crimsonbench.controller.main", "--all-namespaces", \
            "--liveness=http://0.0.0.0:8080/healthz", "--log-format=json"]
