# @rules_java//java:java_library.bzl: rbs's java_library.

load("@rbs//java/rules.rbs", _java_library = "java_library")

java_library = _java_library
