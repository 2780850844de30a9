# @rules_shell//shell:sh_binary.bzl: rbs's own sh_binary, for BUILD files written for Bazel.

sh_binary = native.sh_binary
