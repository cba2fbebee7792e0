#!/bin/sh
# Regenerates the gRPC code of the A2A face from the two .proto files here,
# with buf and the protoc plugins pinned in tools/go.mod (no protoc needed).
set -eu
cd "$(dirname "$0")"
rm -rf gen
go tool -modfile=tools/go.mod buf generate
rm -rf ../a2apb ../a2apb03
mv gen/github.com/mcpv2/mcpv2/edge/a2a/a2apb ../a2apb
mv gen/github.com/mcpv2/mcpv2/edge/a2a/a2apb03 ../a2apb03
rm -rf gen
