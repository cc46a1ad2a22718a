# Shared helpers of the e2e/kind build scripts (sourced, not run), on top of e2e/lib.sh's.
# Set LOG_TAG before sourcing.

source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
KIND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$KIND_DIR/../.." && pwd)
KIND_VERSION=${KIND_VERSION:-v0.33.0}
K8S_VERSION=${K8S_VERSION:-v1.36.3}
SUITE=${SUITE:-bookworm}
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local

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
  ensure_tools debootstrap
  if [ "$FORCE" = 1 ] || [ ! -s "$tar" ]; then
    ROOTFS_HOOK=_slim_rootfs debootstrap_tar "$tar" "$SUITE" --include="$packages"
  fi
  step "docker import $ref" 600 docker import "$tar" "$ref"
  echo "$ref"
}

_slim_rootfs() { # the nodes never read these
  rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/var/log/*.log
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
kind_module_dir() { go_module Dir "sigs.k8s.io/kind@$KIND_VERSION"; }

# kubeadm_const NAME: a string constant of kubeadm for $K8S_VERSION (PauseVersion,
# CoreDNSVersion, DefaultEtcdVersion), read from the k8s.io/kubernetes Go module: the image
# names kubeadm will ask the nodes' containerd for.
kubeadm_const() {
  local dir
  dir=$(go_module Dir "k8s.io/kubernetes@$K8S_VERSION")
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
