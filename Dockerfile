# syntax=docker/dockerfile:1
# One image holding both binaries; tag it as tephra/tephra-scheduler and tephra/tephra-controllers.
# The Deployments set `command`, so there is no ENTRYPOINT.

# Build on the host platform and cross-compile to the target (docker buildx --platform ...).
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# distroless/static has no libc.
ENV CGO_ENABLED=0

# Dependencies first so they are cached across source changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH make build VERSION=$VERSION

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /src/bin/tephra-scheduler /src/bin/tephra-controllers /usr/local/bin/
USER 65532:65532
