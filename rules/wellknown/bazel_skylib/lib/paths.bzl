# @bazel_skylib//lib:paths.bzl: rbs's version of skylib's lib/paths.bzl (adapted from bazel-skylib, Apache-2.0).

"""File path manipulation functions, for Unix-style "/" paths only (as upstream)."""

def _basename(p):
    """Returns the file portion of a path; "" if `p` ends with a slash (as Python's os.path.basename)."""
    return p.rpartition("/")[-1]

def _dirname(p):
    """Returns the path up to, not including, its basename, without trailing slashes unless that leaves it empty."""
    prefix, sep, _ = p.rpartition("/")
    if not prefix:
        return sep
    else:
        # Strip several consecutive slashes, as Python's os.path.dirname does.
        return prefix.rstrip("/")

def _is_absolute(path):
    """Returns True if `path` starts with a slash or a drive letter ("C:...")."""
    return path.startswith("/") or (len(path) > 2 and path[1] == ":")

def _join(path, *others):
    """Joins path components as Python's os.path.join does on POSIX.

    A separator goes before each component but the first, unless the path so
    far is empty or ends in one; an absolute component discards all before it.
    """
    result = path

    for p in others:
        if _is_absolute(p):
            result = p
        elif not result or result.endswith("/"):
            result += p
        else:
            result += "/" + p

    return result

def _normalize(path):
    """Normalizes a path as Python's os.path.normpath does on POSIX.

    "" is "."; "." segments go (unless the path is just "."); trailing slashes
    go (unless the path is all slashes); ".." removes the segment before it if
    there is one, else stays as a leading ".." (dropped after a leading "/");
    one or two leading slashes are kept, three or more become one; adjacent
    internal slashes collapse.
    """
    if not path:
        return "."

    if path.startswith("//") and not path.startswith("///"):
        initial_slashes = 2
    elif path.startswith("/"):
        initial_slashes = 1
    else:
        initial_slashes = 0
    is_relative = (initial_slashes == 0)

    components = path.split("/")
    new_components = []

    for component in components:
        if component in ("", "."):
            continue
        if component == "..":
            if new_components and new_components[-1] != "..":
                # Only pop the last segment if it isn't another "..".
                new_components.pop()
            elif is_relative:
                # Preserve leading ".." segments for relative paths.
                new_components.append(component)
        else:
            new_components.append(component)

    path = "/".join(new_components)
    if not is_relative:
        path = ("/" * initial_slashes) + path

    return path or "."

_BASE = 0
_SEPARATOR = 1
_DOT = 2
_DOTDOT = 3

def _is_normalized(str, look_for_same_level_references = True):
    """Returns True if the path has no ".." segment (nor, if look_for_same_level_references, any "." segment)."""
    state = _SEPARATOR
    for c in str.elems():
        is_separator = False
        if c == "/":
            is_separator = True

        if state == _BASE:
            if is_separator:
                state = _SEPARATOR
            else:
                state = _BASE
        elif state == _SEPARATOR:
            if is_separator:
                state = _SEPARATOR
            elif c == ".":
                state = _DOT
            else:
                state = _BASE
        elif state == _DOT:
            if is_separator:
                if look_for_same_level_references:
                    # "." segment found.
                    return False
                state = _SEPARATOR
            elif c == ".":
                state = _DOTDOT
            else:
                state = _BASE
        elif state == _DOTDOT:
            if is_separator:
                return False
            else:
                state = _BASE

    if state == _DOT:
        if look_for_same_level_references:
            # "." segment found.
            return False
    elif state == _DOTDOT:
        return False
    return True

def _relativize(path, start):
    """Returns the portion of `path` relative to `start`; fails if `path` is not beneath `start`.

    Unlike Python's os.path.relpath it never walks up with "..". Paths that
    start with ".." only relativize against a start with the same leading
    ".." segments. As upstream (bazel-skylib issue #616), a `path` equal to
    `start` comes back whole.
    """
    segments = _normalize(path).split("/")
    start_segments = _normalize(start).split("/")
    if start_segments == ["."]:
        start_segments = []
    start_length = len(start_segments)

    if (path.startswith("/") != start.startswith("/") or
        len(segments) < start_length):
        fail("Path '%s' is not beneath '%s'" % (path, start))

    for ancestor_segment, segment in zip(start_segments, segments):
        if ancestor_segment != segment:
            fail("Path '%s' is not beneath '%s'" % (path, start))

    length = len(segments) - start_length
    result_segments = segments[-length:]
    return "/".join(result_segments)

def _replace_extension(p, new_extension):
    """Replaces the extension of the path's file, or adds `new_extension` (give its dot) if it has none."""
    return _split_extension(p)[0] + new_extension

def _split_extension(p):
    """Splits `p` into `(root, ext)` with `root + ext == p`; `ext` is "" or starts with its dot.

    A leading dot of the basename is no extension: ".bashrc" splits into
    (".bashrc", "").
    """
    b = _basename(p)
    last_dot_in_basename = b.rfind(".")

    # If there is no dot or the only dot in the basename is at the front, then
    # there is no extension.
    if last_dot_in_basename <= 0:
        return (p, "")

    dot_distance_from_end = len(b) - last_dot_in_basename
    return (p[:-dot_distance_from_end], p[-dot_distance_from_end:])

def _starts_with(path_a, path_b):
    """Returns True if and only if path_b is an ancestor of path_a (after normalizing both; case-sensitive)."""
    if not path_b:
        # all paths start with the empty string
        return True
    norm_a = _normalize(path_a)
    norm_b = _normalize(path_b)
    if len(norm_b) > len(norm_a):
        return False
    if not norm_a.startswith(norm_b):
        return False
    return len(norm_a) == len(norm_b) or norm_a[len(norm_b)] == "/"

paths = struct(
    basename = _basename,
    dirname = _dirname,
    is_absolute = _is_absolute,
    join = _join,
    normalize = _normalize,
    is_normalized = _is_normalized,
    relativize = _relativize,
    replace_extension = _replace_extension,
    split_extension = _split_extension,
    starts_with = _starts_with,
)
