# @rules_cc//cc/common:cc_info.bzl: rbs's CcInfo, for rules written for Bazel.

load("@rbs//cc/rules.rbs", _CcInfo = "CcInfo")

CcInfo = _CcInfo
