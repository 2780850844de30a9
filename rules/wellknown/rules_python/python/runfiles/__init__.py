from .runfiles import Create, CreateDirectoryBased, CreateManifestBased, Runfiles  # noqa: F401
