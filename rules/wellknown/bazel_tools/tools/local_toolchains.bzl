# @bazel_tools//tools:local_toolchains.bzl: this machine's shell and C/C++
# toolchain, which rbs registers after the workspace's toolchains, as
# Bazel registers its autoconfigured ones.

def _local_sh_toolchain_impl(ctx):
    return [platform_common.ToolchainInfo(path = shell_path())]

local_sh_toolchain = rule(implementation = _local_sh_toolchain_impl)

def _local_cc_toolchain_impl(ctx):
    return [platform_common.ToolchainInfo(cc = cc_toolchain())]

local_cc_toolchain = rule(implementation = _local_cc_toolchain_impl)

def _current_cc_toolchain_impl(ctx):
    # The C/C++ toolchain resolution chose, as a target: its make
    # variables, as Bazel's current_cc_toolchain gives them to rules
    # that list it in toolchains.
    cc = ctx.toolchains["@bazel_tools//tools/cpp:toolchain_type"].cc
    return [platform_common.TemplateVariableInfo({
        "CC": " ".join([cc.cc] + cc.conlyopts),
        "CC_FLAGS": " ".join(cc.conlyopts),
        "AR": cc.ar,
    })]

current_cc_toolchain = rule(implementation = _current_cc_toolchain_impl, toolchains = ["@bazel_tools//tools/cpp:toolchain_type"])
