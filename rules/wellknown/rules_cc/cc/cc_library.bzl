# @rules_cc//cc:cc_library.bzl: rbs's own cc_library, for BUILD files written for Bazel.

load("@rbs//cc/rules.rbs", _cc_library = "cc_library")

cc_library = _cc_library
