#!/bin/sh
# The fio driver: what the operator runs by exec in the run's fio driver pod to start,
# poll and end a step (or the prefill). manifests/fio_driver.py builds the execs and
# parses the replies (StepReport); this file is the whole protocol's other side. It is
# shipped in the runner image (/usr/local/lib/crimsonbench/fio-driver.sh), and the
# operator installs its own copy into a pod whose image has another (or none).
#
#   fio-driver.sh start ROOT KEY DEADLINE N [NAME TEXT]... [FIO CLIENT ARGUMENT]...
#   fio-driver.sh poll  ROOT KEY WAIT     (WAIT: seconds to wait in the pod for the end)
#   fio-driver.sh end   ROOT KEY stored|drop
#
# Every reply's first line is one JSON object, {"state": ...}:
#   start: started | exists (the step's directory was there: started earlier)
#   poll:  missing {now} | running {now, started} | done {now, started, ended, rc}, and
#          when done the step's output after it: files between `==> name <==` lines
#          (results/step_log.py reads them)
#   end:   stored | dropped | missing
# Times are epoch seconds of the pod's clock (started 0: not begun yet).
#
# A step's directory ROOT/KEY is its whole state, so an operator restarted mid-step finds
# it: the job files and the files the operator left (osds.json, reactor_osds, the start
# barrier's start_barrier.py and barrier.args), and once
# it ran: started, ended, rc (written last: rc exists only once `out` is complete), out.
# Every file a poll or an end reads is written whole or not at all (put: a temporary file,
# then a rename in the same directory): a poll racing the write reads the state before it,
# never an empty file (a `date > started` in place was read empty on a busy node: invalid
# JSON, a failed run).
# The step runs in a session of its own (`run`, below), so it outlives the exec that
# started it and the operator; `end ... drop` signals that session.
set -u
KEEP_STORED=3  # stored steps kept to look at by hand (the emptyDir is not for ever)

# put FILE TEXT: FILE holds TEXT and a newline, or is as it was (rename is atomic)
put() { printf '%s\n' "$2" > "$1.part" && mv -f "$1.part" "$1"; }

# The step itself, in its directory: $1 deadline (s), the rest fio's --client arguments.
# With reactor_osds ("INTERVAL ID ID ..."), one round of `ceph tell osd.N dump_metrics
# reactor_utilization` per interval into reactor.log while fio runs, each answer after a
# "# ROUND_EPOCH osd.N rc=RC" line (with its stderr when it failed). A background list
# ignores SIGINT (what `drop` sends), so the sampler is stopped with TERM once fio ended.
run_step() {
  dl=$1; shift
  put started "$(date +%s.%N)"
  sampler=
  if [ -s reactor_osds ]; then
    (
      read -r iv ids < reactor_osds
      u=${CEPH_USERNAME:-admin}; case "$u" in client.*) ;; *) u="client.$u" ;; esac
      trap 'kill "$c" 2>/dev/null; exit 0' TERM
      while :; do
        t=$(date +%s.%N)
        for i in $ids; do
          timeout 20 ceph -n "$u" tell "osd.$i" dump_metrics reactor_utilization \
            > tell.out 2> tell.err &
          c=$!; rc=0; wait "$c" || rc=$?
          echo "# $t osd.$i rc=$rc"; cat tell.out; [ "$rc" = 0 ] || cat tell.err; echo
        done
        sleep "$iv" & c=$!; wait "$c"
      done
    ) > reactor.log 2>&1 &
    sampler=$!
  fi
  # Several clients: their jobs meet at the start barrier before they start (the step's
  # job files name this pod's address, barrier.args says which). fio starts once it
  # listens; a barrier that never does makes every job fail to connect, and fio says so.
  barrier=
  if [ -s barrier.args ]; then
    read -r n cap port token host < barrier.args
    python3 start_barrier.py "$n" "$cap" "$port" "$token" "$host" > barrier.log 2>&1 &
    barrier=$!
    i=0
    while [ ! -e barrier.ready ] && [ "$i" -lt 100 ] && kill -0 "$barrier" 2>/dev/null; do
      sleep 0.1; i=$((i + 1))
    done
  fi
  rc=0
  # --foreground keeps fio in the session's process group, which `drop` signals
  timeout --foreground -s INT "$dl" \
    fio --output-format=json+ --output=fio.json "$@" > fio.log 2>&1 || rc=$?
  put ended "$(date +%s.%N)"
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; fi
  if [ -n "$barrier" ]; then kill "$barrier" 2>/dev/null; wait "$barrier" 2>/dev/null; fi
  {
    if [ -s fio.log ]; then echo "==> fio.log <=="; cat fio.log; fi
    if [ -e reactor.log ]; then echo "==> reactor.log <=="; cat reactor.log; fi
    if [ -e barrier.log ]; then echo "==> barrier.log <=="; cat barrier.log; fi
    echo "==> fio.json <=="
    cat fio.json 2>/dev/null || true
    echo
    for f in *_iops.*.log*; do
      [ -e "$f" ] || continue
      echo "==> $f <=="
      cat "$f"
    done
  } > out.part
  mv out.part out
  put rc "$rc"
}

# Once per attempt (mkdir is the lock): write the files, launch the step, return.
start() {
  root=$1; d=$1/$2; dl=$3; n=$4; shift 4
  mkdir -p "$root"
  if ! mkdir "$d" 2>/dev/null; then echo '{"state":"exists"}'; return; fi
  while [ "$n" -gt 0 ]; do printf '%s' "$2" > "$d/$1"; shift 2; n=$((n - 1)); done
  cd "$d" || exit 1
  setsid sh "$SELF" run "$dl" "$@" < /dev/null > /dev/null 2>&1 &
  put pid "$!"
  echo '{"state":"started"}'
}

poll() {
  d=$1/$2; i=0; n=$(( $3 * 10 ))
  while [ -d "$d" ] && [ ! -e "$d/rc" ] && [ "$i" -lt "$n" ]; do sleep 0.1; i=$((i + 1)); done
  now=$(date +%s.%N)
  if [ ! -d "$d" ]; then printf '{"state":"missing","now":%s}\n' "$now"; return; fi
  cd "$d" || exit 1
  started=$(cat started 2>/dev/null); started=${started:-0}  # not begun yet
  if [ ! -e rc ]; then
    printf '{"state":"running","now":%s,"started":%s}\n' "$now" "$started"
    return
  fi
  printf '{"state":"done","now":%s,"started":%s,"ended":%s,"rc":%s}\n' \
    "$now" "$started" "$(cat ended)" "$(cat rc)"
  cat out
  if [ -e osds.json ]; then echo "==> osds.json <=="; cat osds.json; echo; fi
}

# stored: the operator holds the result (the directory kept aside, the last KEEP_STORED
# of them); drop: the attempt is killed and kept aside for the run, the key free again.
end() {
  d=$1/$2
  if [ ! -d "$d" ]; then echo '{"state":"missing"}'; return; fi
  pid=$(cat "$d/pid" 2>/dev/null)
  if [ -n "$pid" ] && [ ! -e "$d/rc" ]; then
    kill -INT -- "-$pid" 2>/dev/null || true
  fi
  if [ "$3" = stored ]; then
    rm -rf "$d.stored"; mv "$d" "$d.stored"
    ls -1dt "$1"/*.stored | tail -n +$((KEEP_STORED + 1)) | while read -r old; do
      rm -rf "$old"
    done
    echo '{"state":"stored"}'
  else
    mv "$d" "$d.dropped.$(date +%s%N)"
    echo '{"state":"dropped"}'
  fi
}

case $0 in /*) SELF=$0 ;; *) SELF=$(pwd)/$0 ;; esac
cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  start) start "$@" ;;
  poll) poll "$@" ;;
  end) end "$@" ;;
  run) run_step "$@" ;;
  *) echo "usage: fio-driver.sh start|poll|end ROOT KEY ..." >&2; exit 2 ;;
esac
