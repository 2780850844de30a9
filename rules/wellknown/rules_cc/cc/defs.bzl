# @rules_cc//cc:defs.bzl: rbs's own C/C++ rules, for BUILD files written for Bazel.

load("@rbs//cc/rules.rbs", _CcInfo = "CcInfo", _cc_binary = "cc_binary", _cc_library = "cc_library", _cc_test = "cc_test")

cc_binary = _cc_binary
cc_library = _cc_library
cc_test = _cc_test
CcInfo = _CcInfo
