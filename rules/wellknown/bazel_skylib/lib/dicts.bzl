# @bazel_skylib//lib:dicts.bzl: rbs's version of skylib's lib/dicts.bzl (adapted from bazel-skylib, Apache-2.0).

"""Functions that operate on dictionaries."""

def _add(*dictionaries, **kwargs):
    """Returns a new dict with all the entries of the given dicts, then of kwargs; later keys win.

    No dicts give {}; one gives a copy of it.
    """
    result = {}
    for d in dictionaries:
        result.update(d)
    result.update(kwargs)
    return result

def _omit(dictionary, keys):
    """Returns a new dict with the entries of `dictionary` whose keys are not in the sequence `keys`."""
    keys_set = {k: None for k in keys}
    return {k: dictionary[k] for k in dictionary if k not in keys_set}

def _pick(dictionary, keys):
    """Returns a new dict with the entries of `dictionary` whose keys are in the sequence `keys`, in the order of `keys`."""
    return {k: dictionary[k] for k in keys if k in dictionary}

dicts = struct(
    add = _add,
    omit = _omit,
    pick = _pick,
)
