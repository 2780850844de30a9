# @bazel_skylib//lib:shell.bzl: rbs's version of skylib's lib/shell.bzl (adapted from bazel-skylib, Apache-2.0).

"""Shell utility functions."""

def _array_literal(iterable):
    """Returns a shell array literal of the elements, each str()'d and quoted: ["a", 1] gives ('a' '1')."""
    return "(" + " ".join([_quote(str(i)) for i in iterable]) + ")"

def _quote(s):
    """Quotes `s` in single quotes for a shell command, so that spaces and metacharacters stay literal."""
    return "'" + s.replace("'", "'\\''") + "'"

shell = struct(
    array_literal = _array_literal,
    quote = _quote,
)
