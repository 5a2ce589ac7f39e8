# Tephra's two images, built FROM scratch from what `make image` stages in bin/image/ (static
# binaries built on the host, the host's CA certificates, passwd/group files): nothing is pulled
# from a registry, and the legacy builder builds it (no BuildKit syntax).
#   make image   # tephra/tephra-scheduler:$(IMAGE_TAG), tephra/tephra-controllers:$(IMAGE_TAG)
# The build context is the repository root, cut down by .dockerignore to bin/image/.

# What both images share: /etc/ssl/certs/ca-certificates.crt, /etc/passwd and /etc/group
# (root, and nonroot 65532 as in distroless) and a /tmp.
FROM scratch AS base
COPY bin/image/base/ /
# kubeadm's static pod runs `kube-scheduler` by name: the runtime finds it on the image's PATH.
ENV PATH=/usr/local/bin

# The scheduler: tephra-scheduler, and kube-scheduler as a symbolic link to it, so that the image
# drops into a kubeadm control plane by changing only `image:` and adding
#   --config=/etc/tephra/kubeadm.yaml
# (manifests/overlays/replace-default/config-replace-default.yaml reading kubeadm's /etc/kubernetes/scheduler.conf).
FROM base AS tephra-scheduler
COPY bin/image/scheduler/ /
# Root by default, as upstream's kube-scheduler image: kubeadm writes
# /etc/kubernetes/scheduler.conf as root with mode 0600 and its static pod sets no runAsUser, so
# a non-root default user could not read its credentials. The Deployment in manifests/ sets
# runAsUser/runAsGroup 65532 and runAsNonRoot, so it runs as nonroot regardless.
USER 0:0
CMD ["tephra-scheduler"]

# The controllers need no host file: nonroot, as the Deployment in manifests/ also requires.
FROM base AS tephra-controllers
COPY bin/image/controllers/ /
USER 65532:65532
CMD ["tephra-controllers"]
