# CoreDNS, built statically from github.com/coredns/coredns (Go module proxy).
FROM scratch
COPY coredns /coredns
ENTRYPOINT ["/coredns"]
