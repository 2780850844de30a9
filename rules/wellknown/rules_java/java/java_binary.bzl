# @rules_java//java:java_binary.bzl: rbs's java_binary.

load("@rbs//java/rules.rbs", _java_binary = "java_binary")

java_binary = _java_binary
