# @bazel_skylib//rules:common_settings.bzl: rbs's version of skylib's rules/common_settings.bzl (adapted from bazel-skylib, Apache-2.0).

"""Common build setting rules

These rules return a BuildSettingInfo with the value of the build setting.
A flag is set on the command line with --//pkg:name=value; a setting (not a
flag) keeps its build_setting_default.

Left out: label_flag and label_setting, which are native rules in Bazel, and
repeatable_string_flag (rbs's command line keeps the last value given for a flag).
"""

BuildSettingInfo = provider(
    doc = "A singleton provider that contains the raw value of a build setting",
    fields = {
        "value": "The value of the build setting in the current configuration. " +
                 "This value may come from the command line, " +
                 "or else it will be the build setting's default.",
    },
)

_MAKE_VARIABLE_ATTR = attr.string(
    doc = "If set, the build setting's value will be available as a Make variable with this " +
          "name in the attributes of rules that list this build setting in their 'toolchains' " +
          "attribute.",
)

_SCOPE_ATTR = attr.string(
    doc = "The scope indicates where a flag can propagate to",
    default = "target",
)

def _is_valid_make_variable_char(c):
    # Restrict make variable names for consistency with predefined ones.
    return c == "_" or c.isdigit() or (c.isalpha() and c.isupper())

def _check_make_variable(ctx):
    # Upstream returns platform_common.TemplateVariableInfo for the rules
    # that list this setting in their 'toolchains' attribute. rbs's rules
    # have no such attribute, so nothing could read the variable: the name is
    # checked as upstream checks it, and no provider is returned.
    make_variable = getattr(ctx.attr, "make_variable", None)
    if not make_variable:
        return []

    if not all([_is_valid_make_variable_char(c) for c in make_variable.elems()]):
        fail("Error setting " + _no_at_str(ctx.label) + ": invalid make variable name '" + make_variable + "'. Make variable names may only contain uppercase letters, digits, and underscores.")

    return []

def _impl(ctx):
    return [
        BuildSettingInfo(value = ctx.build_setting_value),
    ] + _check_make_variable(ctx)

int_flag = rule(
    implementation = _impl,
    build_setting = config.int(flag = True),
    attrs = {
        "make_variable": _MAKE_VARIABLE_ATTR,
        "scope": _SCOPE_ATTR,
    },
    doc = "An int-typed build setting that can be set on the command line",
)

int_setting = rule(
    implementation = _impl,
    build_setting = config.int(),
    attrs = {
        "make_variable": _MAKE_VARIABLE_ATTR,
        "scope": _SCOPE_ATTR,
    },
    doc = "An int-typed build setting that cannot be set on the command line",
)

bool_flag = rule(
    implementation = _impl,
    build_setting = config.bool(flag = True),
    attrs = {
        "scope": _SCOPE_ATTR,
    },
    doc = "A bool-typed build setting that can be set on the command line",
)

bool_setting = rule(
    implementation = _impl,
    build_setting = config.bool(),
    attrs = {
        "scope": _SCOPE_ATTR,
    },
    doc = "A bool-typed build setting that cannot be set on the command line",
)

string_list_flag = rule(
    implementation = _impl,
    build_setting = config.string_list(flag = True),
    attrs = {
        "scope": _SCOPE_ATTR,
    },
    doc = "A string list-typed build setting that can be set on the command line, comma-separated: --//my/setting=foo,bar is ['foo', 'bar']",
)

string_list_setting = rule(
    implementation = _impl,
    build_setting = config.string_list(),
    attrs = {
        "scope": _SCOPE_ATTR,
    },
    doc = "A string list-typed build setting that cannot be set on the command line",
)

def _no_at_str(label):
    """Strips any leading '@'s for labels in the main repo, so that the error string is more friendly."""
    s = str(label)
    if s.startswith("@@//"):
        return s[2:]
    if s.startswith("@//"):
        return s[1:]
    return s

def _string_impl(ctx):
    allowed_values = ctx.attr.values
    value = ctx.build_setting_value
    if len(allowed_values) == 0 or value in ctx.attr.values:
        return [BuildSettingInfo(value = value)] + _check_make_variable(ctx)
    else:
        fail("Error setting " + _no_at_str(ctx.label) + ": invalid value '" + value + "'. Allowed values are " + str(allowed_values))

string_flag = rule(
    implementation = _string_impl,
    build_setting = config.string(flag = True),
    attrs = {
        "values": attr.string_list(
            doc = "The list of allowed values for this setting. An error is raised if any other value is given.",
        ),
        "make_variable": _MAKE_VARIABLE_ATTR,
        "scope": _SCOPE_ATTR,
    },
    doc = "A string-typed build setting that can be set on the command line",
)

string_setting = rule(
    implementation = _string_impl,
    build_setting = config.string(),
    attrs = {
        "values": attr.string_list(
            doc = "The list of allowed values for this setting. An error is raised if any other value is given.",
        ),
        "make_variable": _MAKE_VARIABLE_ATTR,
        "scope": _SCOPE_ATTR,
    },
    doc = "A string-typed build setting that cannot be set on the command line",
)
