# @bazel_tools//tools:local_toolchains.bzl: this machine's shell and C/C++
# toolchain, which rbs registers after the workspace's toolchains, as
# Bazel registers its autoconfigured ones.

def _local_sh_toolchain_impl(ctx):
    return [platform_common.ToolchainInfo(path = shell_path())]

local_sh_toolchain = rule(implementation = _local_sh_toolchain_impl)

def _local_cc_toolchain_impl(ctx):
    return [platform_common.ToolchainInfo(cc = cc_toolchain())]

local_cc_toolchain = rule(implementation = _local_cc_toolchain_impl)
