# @rules_shell//shell:sh_library.bzl: rbs's own sh_library, for BUILD files written for Bazel.

sh_library = native.sh_library
