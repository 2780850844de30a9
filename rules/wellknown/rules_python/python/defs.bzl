# @rules_python//python:defs.bzl: rbs's own Python rules, for BUILD files written for Bazel.

load("@rbs//python/rules.rbs", _py_binary = "py_binary", _py_library = "py_library", _py_test = "py_test")

py_binary = _py_binary
py_test = _py_test
py_library = _py_library
