# @bazel_skylib//lib:structs.bzl: rbs's version of skylib's lib/structs.bzl (adapted from bazel-skylib, Apache-2.0).

"""Functions that operate on structs."""

def _to_dict(s):
    """Returns a dict of the fields of the struct `s` (not converting nested values), keyed in dir() order."""

    # Bazel's structs may still list the methods to_json and to_proto, which
    # are no fields; rbs's have none, but skipping them keeps upstream's result.
    return {
        key: getattr(s, key)
        for key in dir(s)
        if key != "to_json" and key != "to_proto"
    }

structs = struct(
    to_dict = _to_dict,
)
