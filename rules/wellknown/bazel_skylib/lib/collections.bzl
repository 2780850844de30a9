# @bazel_skylib//lib:collections.bzl: rbs's version of skylib's lib/collections.bzl (adapted from bazel-skylib, Apache-2.0).

"""Functions that operate on collections."""

def _after_each(separator, iterable):
    """Returns a new list with `separator` after each item of `iterable`."""
    result = []
    for x in iterable:
        result.append(x)
        result.append(separator)

    return result

def _before_each(separator, iterable):
    """Returns a new list with `separator` before each item of `iterable`."""
    result = []
    for x in iterable:
        result.append(separator)
        result.append(x)

    return result

def _uniq(iterable):
    """Returns a new list of the unique (hashable) elements of `iterable`, in first-seen order."""
    unique_elements = {element: None for element in iterable}
    return list(unique_elements.keys())

collections = struct(
    after_each = _after_each,
    before_each = _before_each,
    uniq = _uniq,
)
