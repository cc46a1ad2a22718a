#!/usr/bin/env bash
# Install what crimsonbench needs on a fresh Debian machine, idempotently:
# Ceph (mon, mgr, osd, client tools) and fio from Debian, prometheus (dashboard tests),
# containerd + runc (under the kind tests' own dockerd), podman + debootstrap (our images),
# chromium (the HTML reports' browser test), then the Python package in .venv.
# Then our fio (scripts/build-fio.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for cmd in ceph-mon:ceph-mon ceph-mgr:ceph-mgr ceph-osd:ceph-osd ceph:ceph-common rbd:ceph-common \
           fio:fio lscpu:util-linux losetup:mount promtool:prometheus \
           containerd:containerd runc:runc podman:podman debootstrap:debootstrap \
           chromium:chromium; do
  command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("${cmd##*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "setup: installing Debian packages: ${need[*]} (and ceph-base)"
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 \
    install -y -q ceph-mon ceph-mgr ceph-osd ceph-common ceph-base fio util-linux mount prometheus \
    containerd runc podman debootstrap chromium >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
# Reinstall only when pyproject.toml changed since the last install.
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[test,operator]"
  rm -f .venv/.installed-* && touch "$stamp"
fi

# Our fio beside crimsonbench (local/fio_program.py): Debian's fio source with the runner
# image's patches, whose rbd engine connects every job at once (images/fio/README.md).
# Without it local runs fall back to the fio on PATH, slower to start each step.
if fio_bin=$(scripts/build-fio.sh); then
  ln -sfn "$fio_bin" .venv/bin/fio
else
  rm -f .venv/bin/fio
  echo "setup: WARNING: our fio did not build (above); local runs use $(command -v fio)" >&2
fi
