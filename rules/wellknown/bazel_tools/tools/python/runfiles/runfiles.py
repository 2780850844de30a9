"""rbs's runfiles library for Python, with the interface of Bazel's.

    from bazel_tools.tools.python.runfiles import runfiles   # or
    from python.runfiles import runfiles                      # rules_python's name

    r = runfiles.Create()
    path = r.Rlocation("_main/pkg/data.txt")

A path starts with a repository's name: the main repository's directory
(_main under modules, else the workspace's name), the name its module gives
it (through the tree's _repo_mapping, as Bazel's library maps it), or
another repository's. The tree is found by $RUNFILES_DIR, else by the
manifest $RUNFILES_MANIFEST_FILE (rbs run and rbs test set both), else as
the nearest directory named *.runfiles above the program.
"""

import os
import posixpath


def Create(env=None):
    """The runfiles of this program, or None when it has none."""
    env = os.environ if env is None else env
    manifest = env.get("RUNFILES_MANIFEST_FILE")
    directory = env.get("RUNFILES_DIR")
    if directory and os.path.isdir(directory):
        return CreateDirectoryBased(directory)
    if manifest and os.path.isfile(manifest):
        return CreateManifestBased(manifest)
    import __main__

    here = os.path.abspath(getattr(__main__, "__file__", "") or ".")
    while here != os.path.dirname(here):
        if here.endswith(".runfiles"):
            return CreateDirectoryBased(here)
        here = os.path.dirname(here)
    return None


def CreateDirectoryBased(path):
    return _Runfiles(_DirectoryBased(path))


def CreateManifestBased(path):
    return _Runfiles(_ManifestBased(path))


class _DirectoryBased(object):
    def __init__(self, path):
        self._root = path

    def find(self, path):
        full = os.path.join(self._root, path)
        return full if os.path.exists(full) else None

    def env(self):
        return {"RUNFILES_DIR": self._root}


class _ManifestBased(object):
    def __init__(self, path):
        self._path = path
        self._files = {}
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(" ")
                self._files.setdefault(key, value)

    def find(self, path):
        target = self._files.get(path)
        return target if target and os.path.exists(target) else None

    def env(self):
        out = {"RUNFILES_MANIFEST_FILE": self._path}
        if self._path.endswith("/MANIFEST"):
            out["RUNFILES_DIR"] = self._path[: -len("/MANIFEST")]
        return out


class _Runfiles(object):
    def __init__(self, strategy):
        self._strategy = strategy
        self._mapping = {}
        mapping = strategy.find("_repo_mapping")
        if mapping:
            with open(mapping) as f:
                for line in f:
                    parts = line.rstrip("\n").split(",")
                    if len(parts) == 3:
                        self._mapping[(parts[0], parts[1])] = parts[2]

    def Rlocation(self, path, source_repo=None):
        """Where runfile path is, or None when there is none."""
        if not path:
            raise ValueError("path is empty")
        if os.path.isabs(path):
            return path
        if posixpath.normpath(path) != path or path.startswith("../"):
            raise ValueError("path is not normalized: %r" % path)
        repo, sep, rest = path.partition("/")
        if sep:
            target = self._mapping.get((source_repo or "", repo))
            if target is not None:
                found = self._strategy.find(target + "/" + rest)
                if found:
                    return found
        return self._strategy.find(path)

    def EnvVars(self):
        """What a program started from this one needs to find the runfiles."""
        return dict(self._strategy.env())

    def CurrentRepository(self, frame=1):
        """The canonical name of the caller's repository: "" for the main one."""
        return ""


# rules_python's newer names.
Runfiles = type("Runfiles", (), {"Create": staticmethod(Create)})
