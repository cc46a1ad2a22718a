#!/usr/bin/env bash
# Our stand-in for the toolbox script Rook's images carry: make `ceph` work without flags in
# a pod that mounts the mon endpoints (ConfigMap key `data` at /etc/rook/mon-endpoints) and
# gets the admin identity from ROOK_CEPH_USERNAME / ROOK_CEPH_SECRET (secret rook-ceph-mon).
#   toolbox.sh               write /etc/ceph/ceph.conf + keyring, then keep them current
#   toolbox.sh --skip-watch  write them once and exit
set -euo pipefail

endpoints_file=/etc/rook/mon-endpoints
conf=/etc/ceph/ceph.conf
keyring=/etc/ceph/keyring

write_conf() {
  # "a=10.0.0.1:6789,b=..." -> "10.0.0.1:6789,..."
  local hosts
  hosts=$(sed -E 's/(^|,)[^=,]+=/\1/g' "$endpoints_file")
  printf '[global]\nmon_host = %s\n\n[client.admin]\nkeyring = %s\n' "$hosts" "$keyring" > "$conf"
  echo "$(date -Is) mon_host = $hosts"
}

secret=${ROOK_CEPH_SECRET:-}
[ -n "$secret" ] || secret=$(cat /var/lib/rook-ceph-mon/secret.keyring)
printf '[%s]\nkey = %s\n' "${ROOK_CEPH_USERNAME:-client.admin}" "$secret" > "$keyring"
write_conf
[ "${1:-}" = --skip-watch ] && exit 0

# By content, not mtime: the kubelet may replace the file within the second it was first read
# (seen: a toolbox started with the mons' endpoints still empty kept an empty mon_host).
last=$(cat "$endpoints_file")
while sleep 5; do
  now=$(cat "$endpoints_file")
  if [ "$now" != "$last" ]; then write_conf; last=$now; fi
done
