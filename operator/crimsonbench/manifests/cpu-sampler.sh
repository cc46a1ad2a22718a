# The CPU sampler of a fio server pod (sourced into its script, manifests/fio.py): once a
# second, one line on stdout (the container's log, which the operator reads: pods/log,
# no exec) for the node's planned CPUs, so the operator can tell how much of them
# something other than the run took during a step (results/node_cpu.py reads the lines;
# results/validity.py judges them):
#
#   EPOCH HZ OWN CPU:BUSY:STEAL ...
#
# BUSY: user+nice+system ticks of that CPU since boot (/proc/stat is the node's, not the
# container's); STEAL: the hypervisor's; OWN: the ticks of every process in this container
# (fio's server and the jobs it forks: all pinned to the planned CPUs by taskset), the
# sampler's own excluded, dead children's included (cutime). HZ: ticks per second.
# Only what sh, date and awk give (any fio image has them). One write per line, well
# under PIPE_BUF: fio's own output never tears a line (and a torn one is skipped).
cpu_sampler() {
  cpus=$1; me=$(exec sh -c 'echo $PPID')
  hz=$(getconf CLK_TCK 2>/dev/null) || hz=100
  while :; do
    t=$(date +%s.%N)
    { cat /proc/stat; cat /proc/[0-9]*/stat 2>/dev/null; } | awk -v t="$t" -v hz="$hz" \
      -v me="$me" -v cpus="$cpus" '
      BEGIN { k = split(cpus, want, " "); for (i = 1; i <= k; i++) planned["cpu" want[i]] = 1 }
      $1 in planned { busy[$1] = $2 + $3 + $4; steal[$1] = $9 + 0; next }
      $1 ~ /^[0-9]+$/ && $1 != me {
        sub(/^.*\) /, "")  # past "pid (comm) ": a comm may hold spaces
        own += $12 + $13 + $14 + $15
      }
      END {
        line = "cpu-sample " t " " hz " " own + 0
        for (i = 1; i <= k; i++) {
          c = "cpu" want[i]
          if (c in busy) line = line " " want[i] ":" busy[c] ":" steal[c]
        }
        print line
      }'
    sleep 1
  done
}
