# @rules_shell//shell:sh_test.bzl: rbs's own sh_test, for BUILD files written for Bazel.

sh_test = native.sh_test
