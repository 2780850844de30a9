# @bazel_skylib//lib:new_sets.bzl: rbs's version of skylib's lib/new_sets.bzl (adapted from bazel-skylib, Apache-2.0).

"""Hash-set algorithms.

A set is `sets.make()` or `sets.make([1, 2, 3])`: a struct whose `_values`
dict has the elements as keys (so they must be hashable), in insertion
order; `sets.to_list` gives them back. `types.is_set` (types.bzl) tells a
set from other values.
"""

load(":dicts.bzl", "dicts")

def _make(elements = None):
    """Returns a new set of the elements of the optional sequence `elements`."""

    # If you change the structure of a set, also update _is_set in types.bzl.
    elements = elements if elements else []
    return struct(_values = {e: None for e in elements})

def _copy(s):
    """Returns a new set with the elements of the set `s`."""
    return struct(_values = dict(s._values))

def _to_list(s):
    """Returns a list of the elements of `s`, in insertion order."""
    return s._values.keys()

def _insert(s, e):
    """Adds the hashable `e` to `s`, in place, and returns `s`."""
    s._values[e] = None
    return s

def _remove(s, e):
    """Removes `e` from `s`, in place (failing if absent), and returns `s`."""
    s._values.pop(e)
    return s

def _contains(a, e):
    """Returns whether `e` is in the set `a`."""
    return e in a._values

def _get_shorter_and_longer(a, b):
    """Returns `a, b` if `a` has fewer elements than `b`, else `b, a`."""
    if _length(a) < _length(b):
        return a, b
    return b, a

def _is_equal(a, b):
    """Returns whether the sets `a` and `b` have the same elements."""
    return a._values == b._values

def _is_subset(a, b):
    """Returns whether every element of `a` is in `b`."""
    for e in a._values.keys():
        if e not in b._values:
            return False
    return True

def _disjoint(a, b):
    """Returns whether `a` and `b` have no element in common."""
    shorter, longer = _get_shorter_and_longer(a, b)
    for e in shorter._values.keys():
        if e in longer._values:
            return False
    return True

def _intersection(a, b):
    """Returns a new set of the elements in both `a` and `b`."""
    shorter, longer = _get_shorter_and_longer(a, b)
    return struct(_values = {e: None for e in shorter._values.keys() if e in longer._values})

def _union(*args):
    """Returns a new set of the elements of all the sets given."""
    return struct(_values = dicts.add(*[s._values for s in args]))

def _difference(a, b):
    """Returns a new set of the elements of `a` that are not in `b`."""
    return struct(_values = {e: None for e in a._values.keys() if e not in b._values})

def _length(s):
    """Returns the number of elements of `s`."""
    return len(s._values)

def _repr(s):
    """Returns a string for `s`: the repr of its list of elements."""
    return repr(s._values.keys())

sets = struct(
    make = _make,
    copy = _copy,
    to_list = _to_list,
    insert = _insert,
    contains = _contains,
    is_equal = _is_equal,
    is_subset = _is_subset,
    disjoint = _disjoint,
    intersection = _intersection,
    union = _union,
    difference = _difference,
    length = _length,
    remove = _remove,
    repr = _repr,
    str = _repr,
    # is_set is declared in types.bzl
)
