# A Kubernetes component image (kube-apiserver, kube-controller-manager, kube-scheduler,
# kube-proxy, etcd) around our own binary, as kubeadm names them. The binaries are linked
# against glibc, so the base is a Debian bookworm minbase rootfs (with iptables, nftables
# and conntrack for kube-proxy), shared by all of them: one layer in the nodes' containerd.
ARG BASE
FROM ${BASE}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ARG NAME
COPY ${NAME} /usr/local/bin/${NAME}
