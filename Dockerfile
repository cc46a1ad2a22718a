# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build --target operator -t crimsonbench-operator .
#   docker build --target fio      -t crimsonbench-fio .
# BASE may point at a locally imported Debian bookworm rootfs (see the real-node e2e) where
# no registry is reachable; anywhere else the default pulls debian:bookworm-slim.
ARG BASE=debian:bookworm-slim

# ---------------------------------------------------------------- fio, patched
# fio built from the source Debian bookworm ships, with one patch of ours
# (images/fio/README.md): stock `fio --server` reads a client's RUN up to a second late,
# which every step paid and which set the start skew between client nodes.
FROM ${BASE} AS fio-build
ARG FIO_VERSION=3.33
ARG FIO_SHA256=d2410e13e0f379d061d077cc5ae325835bb7c6186aa7bafc1df954cbc9b014fc
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc make pkg-config patch curl ca-certificates libc6-dev \
      librbd-dev librados-dev libaio-dev zlib1g-dev libnuma-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
RUN curl -fsSL -o fio.tar.gz \
      "http://deb.debian.org/debian/pool/main/f/fio/fio_${FIO_VERSION}.orig.tar.gz" \
 && echo "${FIO_SHA256}  fio.tar.gz" | sha256sum -c - \
 && tar xzf fio.tar.gz
COPY images/fio/*.patch /src/patches/
# configure leaves an engine out silently when its headers are missing: --enghelp=rbd fails
# the build instead of shipping a fio without the rbd engine.
RUN cd "fio-${FIO_VERSION}" \
 && for p in /src/patches/*.patch; do patch -p1 < "$p"; done \
 && ./configure --disable-native --disable-tcmalloc --prefix=/usr \
 && make -j"$(nproc)" fio \
 && ./fio --enghelp=rbd > /dev/null \
 && install -D -m 0755 fio /out/fio

# ---------------------------------------------------------------- fio runner
# What the Jobs run: fio with the rbd engine, the rbd/ceph CLIs, lscpu for the topology probe.
# Debian's fio package stays for its libraries and tools; its binary is diverted to
# /usr/bin/fio.debian and ours takes /usr/bin/fio.
FROM ${BASE} AS fio
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      fio ceph-common util-linux procps ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && dpkg-divert --local --rename --divert /usr/bin/fio.debian --add /usr/bin/fio \
 && mkdir -p /etc/ceph && chown 167:167 /etc/ceph
COPY --from=fio-build /out/fio /usr/bin/fio
# The fio driver's script (operator/crimsonbench/manifests/fio_driver.py): the driver pod
# runs this copy when it is the operator's own (sha256), else the operator sends its own.
COPY operator/crimsonbench/manifests/fio-driver.sh /usr/local/lib/crimsonbench/fio-driver.sh
RUN sh -n /usr/local/lib/crimsonbench/fio-driver.sh
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
