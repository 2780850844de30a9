# @rules_python//python:py_test.bzl: rbs's own py_test, for BUILD files written for Bazel.

load("@rbs//python/rules.rbs", _py_test = "py_test")

py_test = _py_test
