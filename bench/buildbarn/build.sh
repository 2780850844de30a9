#!/usr/bin/env bash
# Builds Buildbarn's servers as plain Go binaries (no Bazel) at a pinned
# commit, for bench/rbe-vs-buildbarn.sh, and prints the directory that holds
# bb_storage, bb_scheduler, bb_worker and bb_runner. A second run reuses
# the binaries.
#
#   bench/buildbarn/build.sh
#
# bb-remote-execution is not served by the Go module proxy, so its source is
# cloned from $BB_REMOTE_EXECUTION_GIT (default: GitHub; any clone of that
# repository that holds the pinned commit will do). bb-storage, the version
# bb-remote-execution's go.mod names, and every other module come from the
# module proxy. Two patches, kept beside this script, are applied:
#   - bytestream-service-registrar.diff: bb-storage's own patch of
#     genproto's bytestream package (RegisterByteStreamServer takes a
#     grpc.ServiceRegistrar), which its Bazel build applies and a Go build
#     needs as a `replace`;
#   - rev2.0-compat.diff: Buildbarn dropped REv2.0, which Bazel 4.2.3
#     speaks, in bb-remote-execution e6ab874. The patch lowers the oldest
#     API version the scheduler accepts to 2.0 and restores the worker's
#     handling of output_files and output_directories (created before the
#     action runs, reported in the result's legacy fields), as before that
#     commit. Results measured with it say so.
set -euo pipefail

commit=13313e6ab05b00769af48cf5d6e4926ce15b1f2b
src=${BB_REMOTE_EXECUTION_GIT:-https://github.com/buildbarn/bb-remote-execution.git}
bytestream=google.golang.org/genproto/googleapis/bytestream
bytestream_version=v0.0.0-20260526163538-3dc84a4a5aaa
here=$(cd "$(dirname "$0")" && pwd)
out=${XDG_CACHE_HOME:-$HOME/.cache}/rbs-bench/buildbarn-${commit:0:12}

if [ -x "$out/bin/bb_storage" ] && [ -x "$out/bin/bb_scheduler" ] && [ -x "$out/bin/bb_worker" ] && [ -x "$out/bin/bb_runner" ]; then
  echo "$out/bin"
  exit 0
fi
rm -rf "$out/src"
mkdir -p "$out"
echo "building Buildbarn at bb-remote-execution ${commit:0:12} into $out (a few minutes)" >&2
git clone --quiet "$src" "$out/src" >&2
cd "$out/src"
git checkout --quiet "$commit"
patch --quiet -p1 < "$here/patches/rev2.0-compat.diff"
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
go mod download "$bytestream@$bytestream_version"
mkdir -p third_party
cp -r "$(go env GOMODCACHE)/$bytestream@$bytestream_version" third_party/bytestream
chmod -R u+w third_party/bytestream
(cd third_party/bytestream && patch --quiet -p0 < "$here/patches/bytestream-service-registrar.diff")
go mod edit -replace "$bytestream=./third_party/bytestream"
# bb_storage is built from the bb-storage version this module requires.
go mod edit -tool github.com/buildbarn/bb-storage/cmd/bb_storage
go build -trimpath -ldflags='-s -w' -o "$out/bin/" \
  ./cmd/bb_scheduler ./cmd/bb_worker ./cmd/bb_runner github.com/buildbarn/bb-storage/cmd/bb_storage >&2
echo "$out/bin"
