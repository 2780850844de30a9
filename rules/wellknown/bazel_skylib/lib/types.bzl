# @bazel_skylib//lib:types.bzl: rbs's version of skylib's lib/types.bzl (adapted from bazel-skylib, Apache-2.0).

"""Functions checking types.

They compare type() with that of a sample value, so they hold for rbs's
values as for Bazel's: type(depset()) is "depset", and is_function is True
for def and lambda functions, not for built-ins ("builtin_function_or_method").
"""

# create instance singletons to avoid unnecessary allocations
_a_bool_type = type(True)
_a_dict_type = type({})
_a_list_type = type([])
_a_string_type = type("")
_a_tuple_type = type(())
_an_int_type = type(1)
_a_depset_type = type(depset())
_a_struct_type = type(struct())

def _a_function():
    pass

_a_function_type = type(_a_function)

def _is_list(v):
    """Returns True if v is a list."""
    return type(v) == _a_list_type

def _is_string(v):
    """Returns True if v is a string."""
    return type(v) == _a_string_type

def _is_bool(v):
    """Returns True if v is a bool."""
    return type(v) == _a_bool_type

def _is_none(v):
    """Returns True if v is None."""
    return type(v) == type(None)

def _is_int(v):
    """Returns True if v is an int (not a bool)."""
    return type(v) == _an_int_type

def _is_tuple(v):
    """Returns True if v is a tuple."""
    return type(v) == _a_tuple_type

def _is_dict(v):
    """Returns True if v is a dict."""
    return type(v) == _a_dict_type

def _is_function(v):
    """Returns True if v is a function defined in Starlark (def or lambda)."""
    return type(v) == _a_function_type

def _is_depset(v):
    """Returns True if v is a depset."""
    return type(v) == _a_depset_type

def _is_set(v):
    """Returns True if v is a set made by sets.make() (new_sets.bzl)."""
    return type(v) == _a_struct_type and hasattr(v, "_values") and _is_dict(v._values)

types = struct(
    is_list = _is_list,
    is_string = _is_string,
    is_bool = _is_bool,
    is_none = _is_none,
    is_int = _is_int,
    is_tuple = _is_tuple,
    is_dict = _is_dict,
    is_function = _is_function,
    is_depset = _is_depset,
    is_set = _is_set,
)
