"""sh_toolchain, as Bazel's @bazel_tools//tools/sh:sh_toolchain.bzl gives it (rbs's built-in rule)."""

sh_toolchain = native.sh_toolchain
