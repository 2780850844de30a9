# @rules_python//python:py_binary.bzl: rbs's own py_binary, for BUILD files written for Bazel.

load("@rbs//python/rules.rbs", _py_binary = "py_binary")

py_binary = _py_binary
