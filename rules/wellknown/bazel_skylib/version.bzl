"""The version of bazel_skylib whose interface rbs's copy gives."""

version = "1.7.1"
