# @bazel_tools//tools/cpp:toolchain_utils.bzl: finding the C++ toolchain, as Bazel's, from ctx.toolchains.

CPP_TOOLCHAIN_TYPE = "@bazel_tools//tools/cpp:toolchain_type"

def find_cpp_toolchain(ctx, *, mandatory = True):
    if CPP_TOOLCHAIN_TYPE not in ctx.toolchains:
        fail("In order to use find_cpp_toolchain, you must include the '%s' in the toolchains argument to your rule." % CPP_TOOLCHAIN_TYPE)
    tc = ctx.toolchains[CPP_TOOLCHAIN_TYPE]
    if tc == None:
        if mandatory:
            fail("%s: no C++ toolchain" % ctx.label)
        return None
    return tc.cc

def use_cpp_toolchain(mandatory = False):
    return [config_common.toolchain_type(CPP_TOOLCHAIN_TYPE, mandatory = mandatory)]
