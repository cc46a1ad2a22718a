#!/usr/bin/env bash
# Regenerate the build-error fixtures of tests/scripts/test_skip_rules.py from the real tools
# (podman, apt-get) on a machine that reaches no container registry. Touches nothing of the
# host: apt-get works on lists in a temporary directory; podman builds nothing (the first
# step fails).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
podman pull docker.io/library/debian:bookworm-slim 2> "$here/podman-pull-third-party.err" && exit 1
printf 'FROM docker.io/library/busybox:1.36\nRUN true\n' > third
podman build --network host -f third . 2> "$here/podman-build-third-party.err" && exit 1
# one of ours (every image we build is localhost/...): never pulled, so a broken script
printf 'FROM localhost/crimsonbench-base:nonexistent\nRUN true\n' > ours
podman build --network host -f ours . 2> "$here/podman-build-ours-missing.err" && exit 1
# a Debian mirror that does not resolve, as a typo in our Dockerfile's apt source would give
mkdir -p lists/partial
echo "deb http://deb.debian.invalid/debian bookworm main" > s.list
apt-get -o Dir::Etc::SourceList="$tmp/s.list" -o Dir::Etc::SourceParts=/nonexistent \
  -o Dir::State::Lists="$tmp/lists" -o Debug::NoLocking=1 -o APT::Update::Error-Mode=any \
  update > /dev/null 2> "$here/apt-mirror-unresolved.err" && exit 1
echo "captured into $here"
