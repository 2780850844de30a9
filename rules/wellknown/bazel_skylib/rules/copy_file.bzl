# @bazel_skylib//rules:copy_file.bzl: rbs's version of skylib's rules/copy_file.bzl (adapted from bazel-skylib, Apache-2.0).

"""A rule that copies a file to another place.

native.genrule() is sometimes used to copy files (often wishing to rename them).
The 'copy_file' rule does this with a simpler interface than genrule.

The rule uses a Bash command. Upstream uses cmd.exe when the execution
platform is Windows; rbs executes actions on Linux and macOS only, so it
always uses Bash.
"""

def copy_bash(ctx, src, dst):
    """Copies src to dst with cp, in an action.

    Bazel makes every action output executable; rbs keeps the mode the action
    left, so the command also sets the executable bit when is_executable asks
    for it.
    """
    command = "cp -f \"$1\" \"$2\""
    if ctx.attr.is_executable:
        command += " && chmod +x \"$2\""
    ctx.actions.run_shell(
        inputs = [src],
        outputs = [dst],
        command = command,
        arguments = [src.path, dst.path],
        mnemonic = "CopyFile",
        progress_message = "Copying files",
        use_default_shell_env = True,
    )

def _copy_file_impl(ctx):
    if ctx.attr.allow_symlink:
        ctx.actions.symlink(
            output = ctx.outputs.out,
            target_file = ctx.file.src,
            is_executable = ctx.attr.is_executable,
        )
    else:
        copy_bash(ctx, ctx.file.src, ctx.outputs.out)

    files = depset(direct = [ctx.outputs.out])
    runfiles = ctx.runfiles(files = [ctx.outputs.out])
    if ctx.attr.is_executable:
        return [DefaultInfo(files = files, runfiles = runfiles, executable = ctx.outputs.out)]
    else:
        # Do not include the copied file into the default runfiles of the
        # target, but ensure that it is picked up by a rule's data attribute.
        return [DefaultInfo(files = files, data_runfiles = runfiles)]

_ATTRS = {
    "src": attr.label(mandatory = True, allow_single_file = True),
    "out": attr.output(mandatory = True),
    "is_executable": attr.bool(mandatory = True),
    "allow_symlink": attr.bool(mandatory = True),
}

_copy_file = rule(
    implementation = _copy_file_impl,
    provides = [DefaultInfo],
    attrs = _ATTRS,
)

_copy_xfile = rule(
    implementation = _copy_file_impl,
    executable = True,
    provides = [DefaultInfo],
    attrs = _ATTRS,
)

def copy_file(name, src, out, is_executable = False, allow_symlink = False, **kwargs):
    """Copies a file to another location.

    Args:
      name: Name of the rule.
      src: A Label. The file to make a copy of. (Can also be the label of a rule
          that generates a file.)
      out: Path of the output file, relative to this package.
      is_executable: A boolean. Whether to make the output file executable. When
          True, the rule's output can be executed using `rbs run` and can be
          in the srcs of binary and test rules that require executable sources.
      allow_symlink: A boolean. Whether to allow symlinking instead of copying.
          When False, the output is always a hard copy. When True, the output
          *can* be a symlink, but there is no guarantee that a symlink is
          created (rbs writes a copy either way).
      **kwargs: further keyword arguments, e.g. `visibility`
    """

    copy_file_impl = _copy_file
    if is_executable:
        copy_file_impl = _copy_xfile

    copy_file_impl(
        name = name,
        src = src,
        out = out,
        is_executable = is_executable,
        allow_symlink = allow_symlink,
        **kwargs
    )
