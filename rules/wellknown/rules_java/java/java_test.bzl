# @rules_java//java:java_test.bzl: rbs's java_test.

load("@rbs//java/rules.rbs", _java_test = "java_test")

java_test = _java_test
