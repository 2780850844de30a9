# @bazel_skylib//lib:unittest.bzl: rbs's unit and analysis tests for rule
# authors, with skylib's interface: unittest (tests of Starlark code run at
# analysis), analysistest (tests of a rule's targets: their providers, their
# actions, their analysis failures, in a configuration of the test's
# choosing), loadingtest (tests of what loading declares) and asserts.

load(":new_sets.bzl", new_sets = "sets")

TOOLCHAIN_TYPE = "@bazel_skylib//toolchains/unittest:toolchain_type"

UnittestToolchainInfo = provider(
    doc = "How a unit test's result becomes a script: its extension, and the script for a pass and for failures.",
    fields = ["file_ext", "success_templ", "failure_templ", "join_on", "escape_chars_with", "escape_other_chars_with"],
)

def _unittest_toolchain_impl(ctx):
    return [platform_common.ToolchainInfo(unittest_toolchain_info = UnittestToolchainInfo(
        file_ext = ctx.attr.file_ext,
        success_templ = ctx.attr.success_templ,
        failure_templ = ctx.attr.failure_templ,
        join_on = ctx.attr.join_on,
        escape_chars_with = ctx.attr.escape_chars_with,
        escape_other_chars_with = ctx.attr.escape_other_chars_with,
    ))]

unittest_toolchain = rule(
    implementation = _unittest_toolchain_impl,
    attrs = {
        "file_ext": attr.string(mandatory = True),
        "success_templ": attr.string(mandatory = True),
        "failure_templ": attr.string(mandatory = True),
        "join_on": attr.string(mandatory = True),
        "escape_chars_with": attr.string_dict(),
        "escape_other_chars_with": attr.string(default = ""),
    },
)

def register_unittest_toolchains():
    """rbs registers these toolchains itself, after the workspace's: nothing to do."""
    pass

def _name_of(impl):
    # str() of a function is "<function NAME>".
    s = str(impl)
    if s.startswith("<function "):
        s = s[len("<function "):]
    return s.split(" ")[0].rstrip(">")

def _with_name(impl, attrs):
    attrs = dict(attrs)
    attrs["_impl_name"] = attr.string(default = _name_of(impl))
    return attrs

def _make(impl, attrs = {}, doc = "", toolchains = []):
    """A test rule running impl at analysis; impl returns unittest.end(env)."""
    return rule(
        impl,
        doc = doc,
        attrs = _with_name(impl, attrs),
        test = True,
        toolchains = toolchains + [TOOLCHAIN_TYPE],
    )

_TargetActionsInfo = provider(fields = ["actions", "bin_path"])

def _target_actions_aspect_impl(target, ctx):
    return [_TargetActionsInfo(actions = target.actions, bin_path = ctx.bin_dir.path)]

_target_actions_aspect = aspect(implementation = _target_actions_aspect_impl, attr_aspects = [])

def _make_analysis_test(impl, expect_failure = False, attrs = {}, fragments = [], config_settings = {}, extra_target_under_test_aspects = [], doc = ""):
    """A test rule whose target_under_test is analysed in the configuration config_settings make; impl returns analysistest.end(env)."""
    attrs = _with_name(impl, attrs)
    settings = dict(config_settings)
    if expect_failure:
        settings["//command_line_option:allow_analysis_failures"] = "True"
    cfg = {}
    if settings:
        cfg["cfg"] = analysis_test_transition(settings = settings)
    attrs["target_under_test"] = attr.label(
        aspects = [_target_actions_aspect] + extra_target_under_test_aspects,
        mandatory = True,
        **cfg
    )
    return rule(impl, doc = doc, attrs = attrs, fragments = fragments, analysis_test = True)

def _suite(name, *test_rules):
    """Declares a target NAME_test_I of each rule and a test_suite NAME of them all."""
    tests = []
    for i, test_rule in enumerate(test_rules):
        test_name = "%s_test_%d" % (name, i)
        test_rule(name = test_name)
        tests.append(":" + test_name)
    native.test_suite(name = name, tests = tests)

def _begin(ctx):
    return struct(ctx = ctx, failures = [])

def _escape(tc, text):
    out = []
    for line in text.split("\n"):
        out.append("".join([tc.escape_chars_with.get(c, tc.escape_other_chars_with) + c for c in line.elems()]))
    return tc.join_on.join(out)

def _end(env):
    """The providers of a unit test: a script that passes, or prints the failures and fails."""
    tc = env.ctx.toolchains[TOOLCHAIN_TYPE].unittest_toolchain_info
    script = env.ctx.actions.declare_file(env.ctx.label.name + tc.file_ext)
    if env.failures:
        content = tc.failure_templ % _escape(tc, "\n".join(env.failures))
    else:
        content = tc.success_templ
    env.ctx.actions.write(output = script, content = content, is_executable = True)
    return [DefaultInfo(executable = script)]

def _fail(env, msg):
    full = "In test %s: %s" % (env.ctx.attr._impl_name, msg)
    print(full)
    env.failures.append(full)

def _with_msg(msg, expectation):
    return "%s (%s)" % (msg, expectation) if msg else expectation

def _assert_true(env, condition, msg = "Expected condition to be true, but was false."):
    if not condition:
        _fail(env, msg)

def _assert_false(env, condition, msg = "Expected condition to be false, but was true."):
    if condition:
        _fail(env, msg)

def _assert_equals(env, expected, actual, msg = None):
    if expected != actual:
        _fail(env, _with_msg(msg, 'Expected "%s", but got "%s"' % (expected, actual)))

def _assert_set_equals(env, expected, actual, msg = None):
    if new_sets.is_equal(expected, actual):
        return
    expectation = "Expected %s, but got %s" % (new_sets.str(expected), new_sets.str(actual))
    missing = new_sets.difference(expected, actual)
    unexpected = new_sets.difference(actual, expected)
    if new_sets.length(missing):
        expectation += ", missing are %s" % new_sets.str(missing)
    if new_sets.length(unexpected):
        expectation += ", unexpected are %s" % new_sets.str(unexpected)
    _fail(env, _with_msg(msg, expectation))

def _target_under_test(env):
    target = getattr(env.ctx.attr, "target_under_test")
    if type(target) == type([]):
        # A transition configures it: a list of one target.
        if len(target) != 1:
            fail("target_under_test was split over configurations: %s" % target)
        return target[0]
    return target

def _expect_failure(env, expected_failure_msg = ""):
    target = _target_under_test(env)
    if AnalysisFailureInfo not in target:
        _fail(env, "Expected failure of target_under_test, but found success")
        return
    errors = "".join([cause.message + "\n" for cause in target[AnalysisFailureInfo].causes.to_list()])
    if expected_failure_msg not in errors:
        _fail(env, "Expected errors to contain '%s' but did not. Actual errors:%s" % (expected_failure_msg, errors))

def _target_actions(env):
    return _target_under_test(env)[_TargetActionsInfo].actions

def _target_bin_dir_path(env):
    return _target_under_test(env)[_TargetActionsInfo].bin_path

def _end_analysis_test(env):
    return [AnalysisTestResultInfo(success = not env.failures, message = "\n".join(env.failures))]

def _loading_test_impl(ctx):
    tc = ctx.toolchains[TOOLCHAIN_TYPE].unittest_toolchain_info
    script = ctx.actions.declare_file("loading_test_" + ctx.label.name + tc.file_ext)
    if ctx.attr.failure_message:
        content = tc.failure_templ % _escape(tc, ctx.attr.failure_message)
    else:
        content = tc.success_templ
    ctx.actions.write(output = script, content = content, is_executable = True)
    return [DefaultInfo(executable = script)]

_loading_test = rule(
    implementation = _loading_test_impl,
    attrs = {"failure_message": attr.string()},
    toolchains = [TOOLCHAIN_TYPE],
    test = True,
)

def _loading_make(name):
    """Begins loading tests: a test_suite NAME of the tests made by loadingtest.equals."""
    native.test_suite(name = name + "_tests", tags = [name + "_test_case"])
    return struct(name = name)

def _loading_equals(env, test_case, expected, actual):
    msg = ""
    if expected != actual:
        msg = 'Expected "%s", but got "%s"' % (expected, actual)
    _loading_test(name = "%s_%s" % (env.name, test_case), failure_message = msg, tags = [env.name + "_test_case"])

asserts = struct(
    equals = _assert_equals,
    false = _assert_false,
    set_equals = _assert_set_equals,
    new_set_equals = _assert_set_equals,
    true = _assert_true,
    expect_failure = _expect_failure,
)

unittest = struct(
    make = _make,
    suite = _suite,
    begin = _begin,
    end = _end,
    fail = _fail,
)

analysistest = struct(
    make = _make_analysis_test,
    begin = _begin,
    end = _end_analysis_test,
    fail = _fail,
    target_actions = _target_actions,
    target_bin_dir_path = _target_bin_dir_path,
    target_under_test = _target_under_test,
)

loadingtest = struct(
    make = _loading_make,
    equals = _loading_equals,
)
