# @bazel_tools//tools/cpp:toolchain_utils.bzl: finding the C++ toolchain, as Bazel's, from ctx.toolchains.

CPP_TOOLCHAIN_TYPE = "@bazel_tools//tools/cpp:toolchain_type"

def find_cpp_toolchain(ctx, *, mandatory = True):
    tc = ctx.toolchains[CPP_TOOLCHAIN_TYPE]
    if tc == None and mandatory:
        fail("%s: no C++ toolchain" % ctx.label)
    return tc.cc if tc else None

def use_cpp_toolchain(mandatory = False):
    return [CPP_TOOLCHAIN_TYPE]
