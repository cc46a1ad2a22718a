#!/usr/bin/env bash
# Our own dockerd (Debian's docker.io 20.10) for kind, started by hand — never a system
# service — with ALL of its state in our directories, so it can run beside a kubelet +
# containerd on the host without touching theirs.
#
#   e2e/kind/dockerd.sh install  -> installs docker.io if missing (no daemon is started)
#   e2e/kind/dockerd.sh start    -> starts it if not running; prints DOCKER_HOST
#   e2e/kind/dockerd.sh stop     -> stops it by pid (containers first), cleans up
#   e2e/kind/dockerd.sh status   -> exit 0 and prints DOCKER_HOST when it runs
#   e2e/kind/dockerd.sh bin      -> a directory whose `docker` is the 20.10 client
#
# Where things live:
#   data-root   $CACHE/docker/data        images, volumes, its containerd's root (kept:
#                                          the node image survives between runs)
#   exec-root   /run/crimsonbench-docker/exec   runc state, netns, its containerd's socket
#   socket      unix:///run/crimsonbench-docker/docker.sock
#   log         $CACHE/docker/dockerd.log
# dockerd starts its own containerd (under exec-root/data-root, nothing in
# /var/lib/containerd); cgroups go under /sys/fs/cgroup/*/crimsonbench-docker. Only the
# shims' sockets cannot move: containerd puts them in /run/containerd/s whatever its state
# directory (a compiled-in path), so stop removes that directory again when we made it.
#
# Why these daemon.json settings (measured on the e2e VM: cgroup v1 hybrid, no
# CAP_SYS_RESOURCE, hard nofile 20000):
#   default-runtime   e2e/kind/runc-wrapper: drops the capabilities the VM cannot grant
#                     (CAP_SYS_RESOURCE) from create/run/exec specs, or --privileged and
#                     `docker exec` into it fail ("unable to apply caps").
#   default-ulimits   nofile 20000:20000 (raising it needs CAP_SYS_RESOURCE).
#   oom-score-adjust  0: lowering it needs CAP_SYS_RESOURCE.
#   iptables, ip-forward, ip-masq false, bridge none: no host iptables rules or chains, no
#                     sysctl change, no docker0. kind's nodes talk on one user bridge (L2);
#                     nothing is pulled, so no NAT is needed; published ports (the API
#                     server on 127.0.0.1) go through the userland proxy.
set -euo pipefail

CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA=${CRIMSONBENCH_DOCKER_DATA:-$CACHE/docker/data}
RUN_DIR=${CRIMSONBENCH_DOCKER_RUN:-/run/crimsonbench-docker}
EXEC_ROOT=$RUN_DIR/exec
SOCK=$RUN_DIR/docker.sock
PIDFILE=$RUN_DIR/dockerd.pid
CONF=$RUN_DIR/daemon.json
LOG=$CACHE/docker/dockerd.log
BIN=$CACHE/docker/bin
CGROUP_PARENT=crimsonbench-docker
export DOCKER_HOST="unix://$SOCK"

log() { echo "[dockerd] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

running_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = /usr/sbin/dockerd ] || return 1
  echo "$pid"
}

install() {
  [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] && return 0
  [ "$(id -u)" -eq 0 ] || die "needs root to install docker.io"
  # the package's postinst would start docker.service: a policy-rc.d that denies it
  local policy=/usr/sbin/policy-rc.d saved=""
  if [ -e "$policy" ]; then saved=$(mktemp); cp -p "$policy" "$saved"; fi
  printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 755 "$policy"
  local rc=0
  log "apt-get install docker.io (no daemon is started)"
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get -o DPkg::Lock::Timeout=900 install -y \
    --no-install-recommends docker.io >&2 || rc=$?
  if [ -n "$saved" ]; then mv "$saved" "$policy"; else rm -f "$policy"; fi
  [ "$rc" -eq 0 ] || die "apt-get install docker.io failed (rc=$rc)"
  if pgrep -x dockerd >/dev/null; then die "installing docker.io started a dockerd"; fi
  # the package ships no state; remove what a postinst may have created and nothing uses
  for d in /var/lib/docker /run/docker; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null && log "removed empty $d"
  done
  return 0
}

bin_dir() {
  # kind runs `docker` from PATH; make it the client that matches the 20.10 daemon
  mkdir -p "$BIN"
  ln -sfn /usr/bin/docker "$BIN/docker"
  echo "$BIN"
}

write_config() {
  mkdir -p "$RUN_DIR" "$EXEC_ROOT" "$DATA" "$(dirname "$LOG")"
  cat > "$CONF" <<EOF
{
  "data-root": "$DATA",
  "exec-root": "$EXEC_ROOT",
  "pidfile": "$PIDFILE",
  "hosts": ["$DOCKER_HOST"],
  "runtimes": {"crimsonbench": {"path": "$HERE/runc-wrapper"}},
  "default-runtime": "crimsonbench",
  "default-ulimits": {"nofile": {"Name": "nofile", "Soft": 20000, "Hard": 20000}},
  "oom-score-adjust": 0,
  "cgroup-parent": "$CGROUP_PARENT",
  "exec-opts": ["native.cgroupdriver=cgroupfs"],
  "default-cgroupns-mode": "private",
  "storage-driver": "overlay2",
  "iptables": false,
  "ip6tables": false,
  "ip-forward": false,
  "ip-masq": false,
  "bridge": "none",
  "userland-proxy": true,
  "live-restore": false,
  "log-driver": "json-file",
  "log-opts": {"max-size": "20m", "max-file": "2"},
  "features": {"buildkit": false}
}
EOF
}

start() {
  local pid
  if pid=$(running_pid); then echo "$DOCKER_HOST"; return 0; fi
  install
  [ -x "$HERE/runc-wrapper" ] || die "$HERE/runc-wrapper is not executable"
  write_config
  rm -f "$SOCK" "$PIDFILE"
  log "starting dockerd (log: $LOG)"
  # setsid: not in our process group, so a test's Ctrl-C or timeout does not hit it
  # dockerd creates /run/docker/plugins (legacy plugin sockets) whatever exec-root says:
  # remember whether it was there, so stop removes only what we made
  # and its engine key /etc/docker/key.json (no flag moves it in 20.10)
  [ -e /run/docker ] || touch "$RUN_DIR/made-run-docker"
  [ -e /run/containerd ] || touch "$RUN_DIR/made-run-containerd"
  [ -e /etc/docker/key.json ] || touch "$RUN_DIR/made-key-json"
  # setsid: not in our process group, so a test's Ctrl-C or timeout does not hit it
  setsid /usr/sbin/dockerd --config-file "$CONF" >>"$LOG" 2>&1 < /dev/null &
  local t0=$SECONDS
  until /usr/bin/docker version >/dev/null 2>&1; do
    if ! kill -0 $! 2>/dev/null; then tail -n 30 "$LOG" >&2; die "dockerd exited"; fi
    [ $((SECONDS - t0)) -lt 60 ] || { tail -n 30 "$LOG" >&2; die "dockerd not ready in 60s"; }
    sleep 0.5
  done
  log "dockerd $(running_pid) ready in $((SECONDS - t0))s"
  echo "$DOCKER_HOST"
}

stop() {
  local pid
  if ! pid=$(running_pid); then log "not running"; cleanup_leftovers; return 0; fi
  local ids
  ids=$(/usr/bin/docker ps -aq 2>/dev/null || true)
  if [ -n "$ids" ]; then
    log "stopping containers: $(echo "$ids" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    timeout 120 /usr/bin/docker stop -t 10 $ids >/dev/null 2>&1 || true
  fi
  log "stopping dockerd $pid"
  kill -TERM "$pid"
  local t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    if [ $((SECONDS - t0)) -ge 60 ]; then log "dockerd $pid did not stop in 60s: SIGKILL"; kill -KILL "$pid"; fi
    sleep 0.5
  done
  cleanup_leftovers
  log "stopped in $((SECONDS - t0))s"
}

remove_run_containerd() {
  # A shim killed rather than stopped leaves its socket behind; one still bound belongs to a
  # live containerd (another one may run on this machine): that one, and the directory
  # holding it, stay.
  local s
  for s in /run/containerd/s/*; do
    [ -S "$s" ] || continue
    grep -qF " $s" /proc/net/unix || rm -f "$s"
  done
  rmdir /run/containerd/s /run/containerd 2>/dev/null \
    || log "WARNING: /run/containerd still in use (a live containerd's shim sockets): kept"
}

cleanup_leftovers() {
  # its containerd and shims, if any outlived it (matched by our exec-root, by pid)
  local p
  for p in $(pgrep -f -- "$EXEC_ROOT" || true); do
    log "killing leftover $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-80) ($p)"
    kill -TERM "$p" 2>/dev/null || true
  done
  # mounts under our directories (overlay, netns, shm), deepest first
  local m
  for m in $(awk -v a="$DATA" -v b="$RUN_DIR" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # cgroups docker made for our containers (and what nested kubelets made inside them)
  local c
  for c in /sys/fs/cgroup/*/"$CGROUP_PARENT"; do
    [ -d "$c" ] || continue
    find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ -d "$c" ] && log "WARNING: could not remove $c"
  done
  [ -e "$RUN_DIR/made-key-json" ] && rm -f /etc/docker/key.json
  if [ -e "$RUN_DIR/made-run-docker" ]; then
    rmdir /run/docker/plugins /run/docker 2>/dev/null || log "WARNING: /run/docker not empty: kept"
  fi
  [ -e "$RUN_DIR/made-run-containerd" ] && remove_run_containerd
  rm -rf "$RUN_DIR"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) running_pid >/dev/null && echo "$DOCKER_HOST" ;;
  bin) bin_dir ;;
  *) echo "usage: $0 install|start|stop|status|bin" >&2; exit 2 ;;
esac
