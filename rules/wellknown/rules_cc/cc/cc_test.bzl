# @rules_cc//cc:cc_test.bzl: rbs's own cc_test, for BUILD files written for Bazel.

load("@rbs//cc/rules.rbs", _cc_test = "cc_test")

cc_test = _cc_test
