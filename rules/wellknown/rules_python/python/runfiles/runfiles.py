"""@rules_python//python/runfiles: rbs's runfiles library for Python, as
@bazel_tools//tools/python/runfiles gives it."""

from bazel_tools.tools.python.runfiles.runfiles import *  # noqa: F401,F403
from bazel_tools.tools.python.runfiles.runfiles import Create, CreateDirectoryBased, CreateManifestBased, Runfiles  # noqa: F401
