# @rules_java//java:defs.bzl: rbs's own Java rules, for BUILD files written for Bazel.

load("@rbs//java/rules.rbs", _JavaInfo = "JavaInfo", _java_binary = "java_binary", _java_import = "java_import", _java_library = "java_library", _java_test = "java_test")

java_binary = _java_binary
java_library = _java_library
java_test = _java_test
java_import = _java_import
JavaInfo = _JavaInfo
