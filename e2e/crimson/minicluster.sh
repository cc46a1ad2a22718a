#!/usr/bin/env bash
# A throwaway Ceph cluster on 127.0.0.1 run from the Ceph root of build-ceph-root.sh:
# 1 mon + 1 mgr + classic or crimson OSDs, the way local mode does it (ceph.conf for what a
# daemon needs before it reaches the mon, everything else in the mon config database), so the
# commands here are the reference for local mode against Ceph 20.2.4 crimson.
#
# Library (source it) or CLI:
#   minicluster.sh up DIR PORT [crimson]  mon + mgr, ready for OSDs (DIR: absolute, short;
#                                         "crimson" if any OSD will be crimson)
#   minicluster.sh osd DIR ID FLAVOR STORE [REACTOR_CPUS [ALIEN_CPUS [ALIEN_THREADS]]]
#   minicluster.sh wait DIR NUM_OSDS      until active mgr, OSDs up+in, PGs active+clean
#   minicluster.sh ceph DIR ARGS...       the ceph CLI (also: rbd, fio, in_root)
#   minicluster.sh down DIR               stop daemons by pid, unmount, remove DIR
# FLAVOR: classic|crimson. STORE: bluestore|memstore (classic), cyanstore|seastore|bluestore
# (crimson). REACTOR_CPUS: crimson_seastar_cpu_cores (cpuset list, pinned reactors), "n=N"
# for crimson_seastar_num_threads=N (unpinned), "" for n=1. ALIEN_CPUS/THREADS: crimson bluestore's alien pool.
#
# How the root is used: DIR is bind-mounted at the same path inside ROOTFS, and /proc, /sys,
# /dev are mounted there, so every path in ceph.conf is valid both on the host and in the
# root; daemons run as `chroot ROOTFS <daemon>` with the host's network and PID namespace,
# so the pid we record is the daemon's own (chroot and env exec it).
set -euo pipefail

CEPH_ROOTFS=${CEPH_ROOTFS:-${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}/ceph-root/${CRIMSON_VERSION:-20.2.4}/rootfs}
MC_SIZE=${MC_SIZE:-$((4 << 30))}  # bytes per OSD store (memstore/cyanstore/seastore/bluestore)

mc_log() { printf '[minicluster %s] %s\n' "$(date +%H:%M:%S.%N | cut -c1-12)" "$*" >&2; }

in_root() {
  chroot "$CEPH_ROOTFS" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# ----------------------------------------------------------------- mounts

mc_mount() {  # mc_mount DIR: proc/sys/dev into the root (once) and DIR at the same path
  local dir=$1 m
  for m in proc sys dev; do
    if ! mountpoint -q "$CEPH_ROOTFS/$m"; then
      case $m in
        proc) mount -t proc proc "$CEPH_ROOTFS/proc" ;;
        sys) mount -t sysfs sysfs "$CEPH_ROOTFS/sys" ;;
        dev) mount --bind /dev "$CEPH_ROOTFS/dev" ;;
      esac
      echo "$CEPH_ROOTFS/$m" >>"$dir/mounts"
    fi
  done
  mkdir -p "$CEPH_ROOTFS$dir"
  mount --bind "$dir" "$CEPH_ROOTFS$dir"
  echo "$CEPH_ROOTFS$dir" >>"$dir/mounts"
}

mc_umount() {  # undo mc_mount in reverse order
  local dir=$1
  [ -e "$dir/mounts" ] || return 0
  local m
  tac "$dir/mounts" | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
  rmdir "$CEPH_ROOTFS$dir" 2>/dev/null || true
  rm -f "$dir/mounts"
}

# ----------------------------------------------------------------- CLI wrappers

ceph_() { local dir=$1; shift; in_root ceph -c "$dir/ceph.conf" --connect-timeout 15 "$@"; }
rbd_() { local dir=$1; shift; in_root rbd -c "$dir/ceph.conf" "$@"; }
pyjson() { in_root python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }

# ----------------------------------------------------------------- daemons

mc_spawn() {  # mc_spawn DIR NAME ARGV...: background daemon, own session, pid recorded
  local dir=$1 name=$2
  shift 2
  # setsid does not fork here (a background job is no group leader), chroot and env exec:
  # $! is the daemon's pid.
  setsid chroot "$CEPH_ROOTFS" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@" \
    </dev/null >>"$dir/log/$name.stdout" 2>&1 &
  echo $! >"$dir/pids/$name"
  mc_log "started $name pid $!: $*"
}

mc_alive() { kill -0 "$(cat "$1/pids/$2")" 2>/dev/null; }

mc_stop() {  # mc_stop DIR NAME [GRACE]: SIGTERM, SIGKILL after GRACE seconds
  local dir=$1 name=$2 grace=${3:-20} pid i
  [ -e "$dir/pids/$name" ] || return 0
  pid=$(cat "$dir/pids/$name")
  local t0=$SECONDS
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      mc_log "$name (pid $pid) ignored SIGTERM for ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
  fi
  rm -f "$dir/pids/$name"
  mc_log "stopped $name (pid $pid) in $((SECONDS - t0))s"
}

# ----------------------------------------------------------------- cluster

mc_conf() {  # ceph.conf: only what a daemon needs before it can reach the mon
  local dir=$1 port=$2 fsid=$3 crimson=$4 extra=""
  # Only the mon needs it (`osd set-allow-crimson` checks it); crimson-osd and the clients
  # do not. In [global] every CLI call would print a "dangerous and experimental" warning.
  if [ "$crimson" = crimson ]; then
    extra=$'\tenable_experimental_unrecoverable_data_corrupting_features = crimson\n'
  fi
  cat <<EOF
[global]
	fsid = $fsid
	mon_host = [v2:127.0.0.1:$port]
	public_addr = 127.0.0.1
	cluster_addr = 127.0.0.1
	ms_bind_msgr1 = false
	ms_bind_port_min = $((port + 1))
	ms_bind_port_max = $((port + 99))
	auth_cluster_required = cephx
	auth_service_required = cephx
	auth_client_required = cephx
	run_dir = $dir/run
	admin_socket = \$run_dir/\$cluster-\$name.asok
	pid_file = \$run_dir/\$name.pid
	log_file = $dir/log/\$cluster-\$name.log
	crash_dir = $dir/crash
	mon_data = $dir/mon.\$id
	mgr_data = $dir/mgr.\$id
	osd_data = $dir/osd.\$id
	osd_crush_chooseleaf_type = 0
[mon]
$extra	keyring = \$mon_data/keyring
	mon_cluster_log_file = $dir/log/cluster.log
	mgr_initial_modules = iostat
[mgr]
	keyring = \$mgr_data/keyring
[osd]
	keyring = \$osd_data/keyring
[client]
	keyring = $dir/ceph.client.admin.keyring
	admin_socket = \$run_dir/\$cluster-\$name.\$pid.\$cctid.asok
	log_to_file = false
EOF
}

mc_up() {  # mc_up DIR PORT [crimson]: mon + mgr, base config in the mon db
  local dir=$1 port=$2 crimson=${3:-} fsid
  mkdir -p "$dir"/{run,log,crash,pids,mon.a,mgr.x}
  mc_mount "$dir"
  fsid=$(cat /proc/sys/kernel/random/uuid)
  echo "$fsid" >"$dir/fsid"
  echo "$port" >"$dir/port"
  mc_conf "$dir" "$port" "$fsid" "$crimson" >"$dir/ceph.conf"
  local tool=(ceph-authtool --create-keyring --gen-key)
  in_root "${tool[@]}" "$dir/ceph.client.admin.keyring" -n client.admin --cap mon 'allow *' \
    --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
  in_root "${tool[@]}" "$dir/mgr.x/keyring" -n mgr.x --cap mon 'allow profile mgr' \
    --cap osd 'allow *' --cap mds 'allow *' >/dev/null
  in_root "${tool[@]}" "$dir/mon.keyring" -n mon. --cap mon 'allow *' >/dev/null
  in_root ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/ceph.client.admin.keyring" >/dev/null
  in_root ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/mgr.x/keyring" >/dev/null
  in_root monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" \
    "$dir/monmap" >/dev/null
  in_root ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" \
    --keyring "$dir/mon.keyring"
  mc_spawn "$dir" mon.a ceph-mon -c "$dir/ceph.conf" -i a -f
  local i
  for ((i = 0; i < 120; i++)); do
    ceph_ "$dir" mon stat >/dev/null 2>&1 && break
    mc_alive "$dir" mon.a || { tail -n 20 "$dir/log/mon.a.stdout" >&2; return 1; }
    sleep 0.5
  done
  # The same mon-db settings as local mode's BASE_CONFIG.
  ceph_ "$dir" config assimilate-conf -i /dev/stdin >/dev/null <<EOF
[global]
	mon_allow_pool_size_one = true
	mon_warn_on_pool_no_redundancy = false
	osd_pool_default_size = 1
	osd_pool_default_min_size = 1
	osd_pool_default_pg_autoscale_mode = off
	auth_allow_insecure_global_id_reclaim = false
[osd]
	osd_numa_auto_affinity = false
[mgr]
	mgr_stats_period = 1
[mon]
	paxos_propose_interval = 0.1
EOF
  mc_spawn "$dir" mgr.x ceph-mgr -c "$dir/ceph.conf" -i x -f
}

mc_crimson_prereqs() {  # once per cluster, before the first crimson OSD exists
  local dir=$1
  [ -e "$dir/.crimson" ] && return 0
  ceph_ "$dir" config set global osd_pool_default_crimson true
  ceph_ "$dir" osd set-allow-crimson --yes-i-really-mean-it
  touch "$dir/.crimson"
}

mc_osd() {  # mc_osd DIR ID FLAVOR STORE [REACTOR_CPUS [ALIEN_CPUS [ALIEN_THREADS]]]
  local dir=$1 id=$2 flavor=$3 store=$4 cpus=${5:-} alien=${6:-} alien_n=${7:-}
  local data="$dir/osd.$id" sec="osd.$id" bin
  mkdir -p "$data"
  # Store options are mkfs/startup-time: into ceph.conf's [osd.N].
  {
    echo "[$sec]"
    if [ "$flavor" = crimson ]; then
      bin=crimson-osd
      # crimson reads crimson_osd_objectstore (default bluestore), not osd_objectstore.
      echo "	crimson_osd_objectstore = $store"
    else
      bin=ceph-osd
      echo "	osd_objectstore = $store"
    fi
    case $store in
      memstore|cyanstore)
        echo "	memstore_device_bytes = $MC_SIZE"
        echo "	osd_fast_shutdown = false" ;;
      seastore)
        # seastore creates <osd_data>/block itself at this size (seastore_block_create).
        echo "	seastore_device_size = $MC_SIZE" ;;
      bluestore)
        echo "	bluestore_block_create = true"
        echo "	bluestore_block_size = $MC_SIZE"
        echo "	bluestore_debug_enforce_settings = ssd" ;;
    esac
  } >>"$dir/ceph.conf"
  if [ "$flavor" = crimson ]; then
    mc_crimson_prereqs "$dir"
    # Startup-only reactor options, read by crimson-osd before Seastar starts (it aborts if
    # neither is set, or if --cpuset is on its command line).
    case $cpus in
      "") ceph_ "$dir" config set "$sec" crimson_seastar_num_threads 1 ;;
      n=*) ceph_ "$dir" config set "$sec" crimson_seastar_num_threads "${cpus#n=}" ;;
      *) ceph_ "$dir" config set "$sec" crimson_seastar_cpu_cores "$cpus" ;;
    esac
    if [ -n "$alien" ]; then
      ceph_ "$dir" config set "$sec" crimson_alien_thread_cpu_cores "$alien"
    fi
    if [ -n "$alien_n" ]; then
      ceph_ "$dir" config set "$sec" crimson_alien_op_num_threads "$alien_n"
    fi
  fi
  local uuid secret
  uuid=$(cat /proc/sys/kernel/random/uuid)
  secret=$(in_root ceph-authtool --gen-print-key)
  printf '{"cephx_secret": "%s"}' "$secret" >"$data/new.json"
  ceph_ "$dir" osd new "$uuid" "$id" -i "$data/new.json" >/dev/null
  rm -f "$data/new.json"
  printf '[osd.%s]\n\tkey = %s\n' "$id" "$secret" >"$data/keyring"
  chmod 600 "$data/keyring"
  local t0=$SECONDS
  timeout 300 chroot "$CEPH_ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    "$bin" -c "$dir/ceph.conf" -i "$id" --mkfs --key "$secret" --osd-uuid "$uuid" \
    >>"$dir/log/osd.$id.mkfs" 2>&1 || { tail -n 30 "$dir/log/osd.$id.mkfs" >&2; return 1; }
  mc_log "osd.$id mkfs ($flavor $store) in $((SECONDS - t0))s"
  if [ "$flavor" = crimson ]; then
    mc_spawn "$dir" "osd.$id" crimson-osd -c "$dir/ceph.conf" -i "$id"
  else
    mc_spawn "$dir" "osd.$id" ceph-osd -c "$dir/ceph.conf" -i "$id" -f
  fi
}

mc_not_ready() {  # prints what is missing (empty when ready)
  local dir=$1 n=$2
  { ceph_ "$dir" status --format json; echo; ceph_ "$dir" osd dump --format json; } 2>/dev/null |
    in_root python3 -c '
import json, sys
n = int(sys.argv[1])
lines = [l for l in sys.stdin.read().splitlines() if l.strip()]
if len(lines) < 2:
    print("no status"); sys.exit()
st, dump = json.loads(lines[0]), json.loads(lines[1])
miss = []
if not st.get("mgrmap", {}).get("available"):
    miss.append("mgr not active")
osds = dump.get("osds", [])
up = sum(1 for o in osds if o["up"] and o["in"])
if up < n:
    miss.append(f"{up}/{n} OSDs up+in")
pg = st.get("pgmap", {})
total = pg.get("num_pgs", 0)
clean = sum(s["count"] for s in pg.get("pgs_by_state", []) if s["state_name"] == "active+clean")
if clean < total:
    miss.append(f"{clean}/{total} PGs active+clean")
print("; ".join(miss))
' "$n"
}

mc_wait() {  # mc_wait DIR NUM_OSDS [TIMEOUT]
  local dir=$1 n=$2 limit=${3:-300} t0=$SECONDS miss name
  while :; do
    for name in "$dir"/pids/*; do
      [ -e "$name" ] || continue
      if ! kill -0 "$(cat "$name")" 2>/dev/null; then
        mc_log "${name##*/} died; last output:"
        tail -n 30 "$dir/log/${name##*/}.stdout" >&2
        return 1
      fi
    done
    miss=$(mc_not_ready "$dir" "$n")
    [ -z "$miss" ] && { mc_log "ready after $((SECONDS - t0))s"; return 0; }
    if ((SECONDS - t0 > limit)); then mc_log "not ready after ${limit}s: $miss"; return 1; fi
    sleep 1
  done
}

mc_down() {  # stop OSDs, mgr, mon (by recorded pid), unmount, remove DIR
  local dir=$1 name
  [ -d "$dir" ] || return 0
  for name in "$dir"/pids/osd.*; do [ -e "$name" ] && mc_stop "$dir" "${name##*/}" 20; done
  mc_stop "$dir" mgr.x 20
  mc_stop "$dir" mon.a 20
  mc_umount "$dir"
  if grep -q " $dir" /proc/mounts; then mc_log "still mounted under $dir"; return 1; fi
  rm -rf --one-file-system "$dir"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cmd=${1:?usage: minicluster.sh up|osd|wait|ceph|rbd|down DIR ...}
  shift
  case $cmd in
    up) mc_up "$@" ;;
    osd) mc_osd "$@" ;;
    wait) mc_wait "$@" ;;
    ceph) ceph_ "$@" ;;
    rbd) rbd_ "$@" ;;
    down) mc_down "$@" ;;
    *) echo "unknown command $cmd" >&2; exit 2 ;;
  esac
fi
