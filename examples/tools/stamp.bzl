# A custom rule written with the Bazel rule API: it works unchanged in rbs.

StampInfo = provider(fields = ["text"])

def _stamp_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    inputs = ctx.files.srcs
    ctx.actions.run_shell(
        outputs = [out],
        inputs = inputs,
        command = "(echo \"stamp: $1\"; cat \"${@:2}\") > " + out.path,
        arguments = [ctx.attr.text] + [f.path for f in inputs],
        mnemonic = "Stamp",
        progress_message = "Stamping %s" % ctx.label,
    )
    return [
        DefaultInfo(files = depset([out])),
        StampInfo(text = ctx.attr.text),
    ]

stamp = rule(
    implementation = _stamp_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = True),
        "text": attr.string(mandatory = True),
    },
)
