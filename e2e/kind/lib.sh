# Shared helpers of the e2e/kind build scripts (sourced, not run).
# Set LOG_TAG before sourcing.

CACHE=${CRIMSONBENCH_CACHE:-$HOME/.cache/crimsonbench}
KIND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$KIND_DIR/../.." && pwd)
KIND_VERSION=${KIND_VERSION:-v0.33.0}
K8S_VERSION=${K8S_VERSION:-v1.36.3}
SUITE=${SUITE:-bookworm}
FORCE=${FORCE:-0}
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { echo "[${LOG_TAG:-kind}] $*" >&2; }

# on_exit CMD: run CMD when the script exits, last registered first (one EXIT trap for all).
# Functions called in $(...) or in the background run in a subshell: what they register
# runs when it ends, and only that. A subshell inherits the array of its parent's hooks;
# running those at its end killed the parent's other background builds and removed
# their files (seen on the first cold build: coredns killed when a $(rootfs_image)
# ended), so a subshell's first on_exit starts a list of its own.
_ON_EXIT=()
_ON_EXIT_OWNER=$BASHPID
on_exit() {
  if [ "$_ON_EXIT_OWNER" != "$BASHPID" ]; then _ON_EXIT=(); _ON_EXIT_OWNER=$BASHPID; fi
  _ON_EXIT+=("$1")
  trap _run_on_exit EXIT
}
_run_on_exit() {
  local i
  for ((i = ${#_ON_EXIT[@]} - 1; i >= 0; i--)); do eval "${_ON_EXIT[i]}" || true; done
}
die() { log "ERROR: $*"; exit 1; }

# step NAME TIMEOUT CMD...: run CMD bounded by TIMEOUT seconds, log its duration.
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc=0
  log "$name ..."
  timeout --kill-after=30 "$limit" "$@" >&2 || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && log "$name timed out after ${limit}s"
    die "$name failed (rc=$rc) after $((SECONDS - t0))s"
  fi
  log "$name done in $((SECONDS - t0))s"
}

# Our dockerd (e2e/kind/dockerd.sh). A script that had to start it stops it at exit.
STARTED_DOCKERD=0
ensure_dockerd() {
  [ "$(id -u)" -eq 0 ] || die "needs root (dockerd, debootstrap)"
  if ! DOCKER_HOST=$("$KIND_DIR/dockerd.sh" status); then
    DOCKER_HOST=$("$KIND_DIR/dockerd.sh" start)
    STARTED_DOCKERD=1
    on_exit stop_dockerd_if_started
  fi
  export DOCKER_HOST
  PATH="$("$KIND_DIR/dockerd.sh" bin):$PATH"
  export PATH
}
stop_dockerd_if_started() {
  if [ "$STARTED_DOCKERD" = 1 ]; then "$KIND_DIR/dockerd.sh" stop; fi
}

# The Debian mirror this machine's apt uses (deb822 "URIs:" or one-line "deb URL suite").
find_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk '
      /^[[:space:]]*#/ {next}
      $1 == "URIs:" {for (i = 2; i <= NF; i++) print $i}
      $1 == "deb" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i ~ /:\/\//) {print $i; break}}
    ' "$f"
  done | grep -E '/debian/?$' | grep -v -- '-security' | head -n1
}

# rootfs_image NAME PACKAGES: a debootstrap minbase $SUITE rootfs with PACKAGES (comma
# separated), imported into our dockerd as crimsonbench/kind-rootfs-NAME:KEY (KEY = hash of
# suite + packages). Cached as a tarball; prints the image reference.
rootfs_image() {
  local name=$1 packages=$2
  local key ref tar
  key=$(printf '%s\n%s\n' "$SUITE" "$packages" | sha256sum | cut -c1-12)
  ref="crimsonbench/kind-rootfs-$name:$key"
  tar="$CACHE/kind/rootfs/$SUITE-$name-$key.tar"
  if [ "$FORCE" != 1 ] && docker image inspect "$ref" >/dev/null 2>&1; then
    log "rootfs $ref present"; echo "$ref"; return
  fi
  command -v debootstrap >/dev/null || step "apt-get install debootstrap" 900 \
    env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y debootstrap
  mkdir -p "$(dirname "$tar")"
  if [ "$FORCE" = 1 ] || [ ! -s "$tar" ]; then
    local mirror rootfs
    mirror=${MIRROR:-$(find_mirror)}
    mirror=${mirror:-http://deb.debian.org/debian}
    rootfs=$(mktemp -d "$CACHE/kind/rootfs/$name.XXXXXX")
    # debootstrap mounts proc/sys inside the target: never rm through them
    on_exit "umount_under '$rootfs'; rm -rf --one-file-system '$rootfs' '$tar.tmp'"
    step "debootstrap $name ($SUITE, $mirror)" 1200 \
      debootstrap --variant=minbase --include="$packages" "$SUITE" "$rootfs" "$mirror"
    umount_under "$rootfs"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
           "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/var/log/*.log
    step "tar $name rootfs" 600 tar --numeric-owner --xattrs -C "$rootfs" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf --one-file-system "$rootfs"
  fi
  step "docker import $ref" 600 docker import "$tar" "$ref"
  echo "$ref"
}

umount_under() {
  local m
  for m in $(awk -v r="$1" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

# go_tool NAME MODULE VERSION PACKAGE [LDFLAGS]: a static Go binary, built once into
# $CACHE/kind/tools/NAME/VERSION/NAME; prints its path. A scratch module that requires
# MODULE@VERSION: `go install pkg@version` asks the proxy for the module's version list,
# which it answers 403 for some modules here (sigs.k8s.io/cri-tools).
go_tool() {
  local name=$1 module=$2 version=$3 pkg=$4 ldflags=${5:-}
  local out="$CACHE/kind/tools/$name/$version"
  if [ ! -x "$out/$name" ]; then
    command -v go >/dev/null || die "Go is not installed (needed for $module)"
    mkdir -p "$out"
    local work
    work=$(mktemp -d)
    on_exit "rm -rf '$work'"
    (
      cd "$work"
      go mod init crimsonbench.local/tool >/dev/null 2>&1
      go mod edit -require="$module@$version"
      step "go build $pkg@$version" 1800 env CGO_ENABLED=0 \
        go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg"
    )
    mv "$out/$name.tmp" "$out/$name"
  fi
  echo "$out/$name"
}

# The kind Go module's directory (its images/base/files are part of our base image).
kind_module_dir() {
  local dir
  dir=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" \
        | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or d["Error"])')
  [ -d "$dir" ] || die "go mod download sigs.k8s.io/kind@$KIND_VERSION: $dir"
  echo "$dir"
}

# kubeadm_const NAME: a string constant of kubeadm for $K8S_VERSION (PauseVersion,
# CoreDNSVersion, DefaultEtcdVersion), read from the k8s.io/kubernetes Go module: the image
# names kubeadm will ask the nodes' containerd for.
kubeadm_const() {
  local dir
  dir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
        | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or d["Error"])')
  [ -d "$dir" ] || die "go mod download k8s.io/kubernetes@$K8S_VERSION: $dir"
  sed -n "s/^[[:space:]]*$1 = \"\\([^\"]*\\)\".*/\\1/p" "$dir/cmd/kubeadm/app/constants/constants.go" | head -n1
}

# in_background VAR FUNCTION ARGS...: start FUNCTION ARGS in the background (its stdout to a
# file); `collect VAR` waits for it and sets VAR to its last line of output.
in_background() {
  local var=$1; shift
  local out
  out=$(mktemp)
  "$@" > "$out" &
  local pid=$!
  on_exit "kill $pid 2>/dev/null; rm -f '$out'"
  printf -v "_BG_PID_$var" '%s' "$pid"
  printf -v "_BG_OUT_$var" '%s' "$out"
}
collect() {
  local var=$1 pid out rc=0
  pid=$(eval echo "\$_BG_PID_$var"); out=$(eval echo "\$_BG_OUT_$var")
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || die "background build of $var failed (rc=$rc)"
  printf -v "$var" '%s' "$(tail -n1 "$out")"
}
