#!/usr/bin/env bash
# Regenerates the Go code of rbs's own protos (run: go generate ./proto).
# Needs protoc (Debian: protobuf-compiler); the Go plugins come from go.mod's tools.
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc
for p in worker jobs; do
  protoc --plugin="$bin/protoc-gen-go" --plugin="$bin/protoc-gen-go-grpc" \
    --go_out=. --go_opt=paths=source_relative,M$p.proto=github.com/rbs-build/rbs/proto/${p}pb \
    --go-grpc_out=. --go-grpc_opt=paths=source_relative,M$p.proto=github.com/rbs-build/rbs/proto/${p}pb \
    $p.proto
  mkdir -p ${p}pb
  mv $p.pb.go ${p}_grpc.pb.go ${p}pb/
done
