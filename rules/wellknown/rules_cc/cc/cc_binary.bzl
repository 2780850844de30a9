# @rules_cc//cc:cc_binary.bzl: rbs's own cc_binary, for BUILD files written for Bazel.

load("@rbs//cc/rules.rbs", _cc_binary = "cc_binary")

cc_binary = _cc_binary
