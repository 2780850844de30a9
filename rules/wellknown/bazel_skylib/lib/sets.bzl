# @bazel_skylib//lib:sets.bzl: rbs's version of skylib's lib/sets.bzl (adapted from bazel-skylib, Apache-2.0).

"""Re-exports the hash-set algorithms of new_sets.bzl, as upstream does now that its list-based sets are gone."""

load(":new_sets.bzl", _sets = "sets")

sets = _sets
