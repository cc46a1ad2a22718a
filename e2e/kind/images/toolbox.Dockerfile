# A small image for tests' pods, preloaded in every node: busybox (httpd, nc, sh), curl,
# jq, iproute2 on the bookworm minbase rootfs the component images share.
ARG BASE
FROM ${BASE}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
