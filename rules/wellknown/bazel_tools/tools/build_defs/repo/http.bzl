# @bazel_tools//tools/build_defs/repo:http.bzl: rbs's http_archive and
# http_file, with Bazel's attributes, on repository_ctx's downloads (checked
# against sha256 or integrity, kept in the repository cache).

def _urls(rctx):
    urls = ([rctx.attr.url] if rctx.attr.url else []) + rctx.attr.urls
    if not urls:
        fail("@%s: give url or urls" % rctx.name)
    return urls

def _strip(rctx):
    strip = rctx.attr.patch_strip
    for arg in rctx.attr.patch_args:
        if arg.startswith("-p"):
            strip = int(arg[2:])
    return strip

def _http_archive_impl(rctx):
    if rctx.attr.build_file and rctx.attr.build_file_content:
        fail("@%s: give build_file or build_file_content, not both" % rctx.name)
    rctx.download_and_extract(
        _urls(rctx),
        output = rctx.attr.add_prefix,
        sha256 = rctx.attr.sha256,
        integrity = rctx.attr.integrity,
        type = rctx.attr.type,
        strip_prefix = rctx.attr.strip_prefix,
    )
    for patch in rctx.attr.patches:
        rctx.patch(patch, strip = _strip(rctx))
    for cmd in rctx.attr.patch_cmds:
        result = rctx.execute(["bash", "-c", cmd])
        if result.return_code != 0:
            fail("@%s: patch_cmds %r failed: %s" % (rctx.name, cmd, result.stderr))
    if rctx.attr.build_file:
        rctx.file("BUILD.bazel", rctx.read(rctx.attr.build_file), executable = False)
    elif rctx.attr.build_file_content:
        rctx.file("BUILD.bazel", rctx.attr.build_file_content, executable = False)

_COMMON = {
    "url": attr.string(),
    "urls": attr.string_list(),
    "sha256": attr.string(),
    "integrity": attr.string(),
    "canonical_id": attr.string(),
    "netrc": attr.string(),
    "auth_patterns": attr.string_dict(),
}

http_archive = repository_rule(
    implementation = _http_archive_impl,
    attrs = dict(_COMMON, **{
        "strip_prefix": attr.string(),
        "add_prefix": attr.string(),
        "type": attr.string(),
        "build_file": attr.label(allow_single_file = True),
        "build_file_content": attr.string(),
        "patches": attr.label_list(),
        "patch_args": attr.string_list(),
        "patch_strip": attr.int(),
        "patch_cmds": attr.string_list(),
        "patch_tool": attr.string(),
        "workspace_file": attr.label(),
        "workspace_file_content": attr.string(),
        "remote_file_urls": attr.string_list_dict(),
        "remote_file_integrity": attr.string_dict(),
        "remote_patches": attr.string_dict(),
        "remote_patch_strip": attr.int(),
    }),
    doc = "A repository from an archive, downloaded and checked.",
)

def _http_file_impl(rctx):
    path = rctx.attr.downloaded_file_path
    rctx.download(_urls(rctx), output = "file/" + path, sha256 = rctx.attr.sha256, integrity = rctx.attr.integrity, executable = rctx.attr.executable)
    rctx.file("file/BUILD.bazel", 'filegroup(name = "file", srcs = [%r], visibility = ["//visibility:public"])\nexports_files([%r])\n' % (path, path), executable = False)

http_file = repository_rule(
    implementation = _http_file_impl,
    attrs = dict(_COMMON, **{
        "downloaded_file_path": attr.string(default = "downloaded"),
        "executable": attr.bool(),
    }),
    doc = "A repository of one downloaded file: @NAME//file.",
)
