# @rules_python//python:py_library.bzl: rbs's own py_library, for BUILD files written for Bazel.

load("@rbs//python/rules.rbs", _py_library = "py_library")

py_library = _py_library
