# @rules_java//java:java_import.bzl: rbs's java_import.

load("@rbs//java/rules.rbs", _java_import = "java_import")

java_import = _java_import
