#!/bin/sh
# Builds the mcpv2 container image (Dockerfile: FROM scratch with the static
# binary). Usage: deploy/image.sh [TAG]   (default mcpv2:latest)
# BUILDER overrides the build command (default: buildah bud if buildah is
# installed, else docker build).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-mcpv2:latest}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT INT TERM
# -buildvcs=true: --version names the commit even where a go env file turns
# VCS stamping off.
(cd "$root" && CGO_ENABLED=0 go build -buildvcs=true -trimpath -ldflags=-s -o "$ctx/mcpv2" ./cmd/mcpv2)
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
mkdir "$ctx/data"
if [ -z "${BUILDER:-}" ]; then
	if command -v buildah >/dev/null 2>&1; then BUILDER="buildah bud"; else BUILDER="docker build"; fi
fi
$BUILDER -f "$root/Dockerfile" -t "$tag" "$ctx"
