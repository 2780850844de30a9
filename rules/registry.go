package rules

// Modules from registries, as Bazel resolves them: given --registry URLs
// (http, https or file, in the Bazel Central Registry's layout), the root
// module's bazel_deps and, in turn, each dependency's own MODULE.bazel
// make the module graph; minimal version selection keeps, for each module,
// the highest version anything asks for; each selected module is a
// repository, named by the module, fetched on first use from its
// source.json (url, integrity, strip_prefix, patches). single_version_override
// pins a version (and may add patches), archive_override replaces a
// module's source. Modules rbs provides itself (@bazel_skylib, @rules_cc,
// ...) and those with a local_path_override are not looked up.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rbs-build/rbs/starlark/guard"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// moduleDep is a bazel_dep.
type moduleDep struct {
	name, version, repo, pos string
}

// moduleOverride is a single_version_override or an archive_override.
type moduleOverride struct {
	version    string   // single_version_override
	urls       []string // archive_override
	integrity  string
	strip      string
	patches    []string // labels of the main repository
	patchStrip int
	pos        string
}

// moduleOverrideCalls are MODULE.bazel's single_version_override and
// archive_override.
func (r *registrations) moduleOverrideCalls(env starlark.StringDict) {
	add := func(t *starlark.Thread, name string, o moduleOverride) {
		o.pos = t.CallFrame(1).Pos.String()
		if r.overrides == nil {
			r.overrides = map[string]moduleOverride{}
		}
		r.overrides[name] = o
	}
	env["single_version_override"] = starlark.NewBuiltin("single_version_override", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, version, registry string
		var patches, patchCmds *starlark.List
		var strip int
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "module_name", &name, "version?", &version, "registry?", &registry,
			"patches?", &patches, "patch_cmds?", &patchCmds, "patch_strip?", &strip); err != nil {
			return nil, err
		}
		ps, err := optStringList(patches)
		if err != nil {
			return nil, fmt.Errorf("%s: patches: %v", b.Name(), err)
		}
		add(t, name, moduleOverride{version: version, patches: ps, patchStrip: strip})
		return starlark.None, nil
	})
	env["archive_override"] = starlark.NewBuiltin("archive_override", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, integrity, strip string
		var urls, patches, patchCmds *starlark.List
		var patchStrip int
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "module_name", &name, "urls", &urls, "integrity?", &integrity,
			"strip_prefix?", &strip, "patches?", &patches, "patch_cmds?", &patchCmds, "patch_strip?", &patchStrip); err != nil {
			return nil, err
		}
		us, err := stringList(urls)
		if err != nil {
			return nil, fmt.Errorf("%s: urls: %v", b.Name(), err)
		}
		ps, err := optStringList(patches)
		if err != nil {
			return nil, fmt.Errorf("%s: patches: %v", b.Name(), err)
		}
		add(t, name, moduleOverride{urls: us, integrity: integrity, strip: strip, patches: ps, patchStrip: patchStrip})
		return starlark.None, nil
	})
}

// registryModules resolves the root module's dependencies that need a
// registry: the repositories of the selected modules, by repository name.
func (w *Workspace) registryModules() (map[string]localRepo, error) {
	var wanted []moduleDep
	for _, d := range w.reg.deps {
		if _, own := repositories()[d.name]; own {
			continue
		}
		if _, local := w.reg.repos[d.repo]; local {
			continue
		}
		wanted = append(wanted, d)
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	if len(w.cfg.Registries) == 0 {
		// As before registries: such a dependency is unknown, an error
		// only where it is used.
		return nil, nil
	}
	selected := map[string]string{} // module -> version
	queue := wanted
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if _, own := repositories()[d.name]; own {
			continue
		}
		version := d.version
		if o, ok := w.reg.overrides[d.name]; ok && o.version != "" {
			version = o.version
		}
		if old, seen := selected[d.name]; seen && compareVersions(old, version) >= 0 {
			continue
		}
		selected[d.name] = version
		if o, ok := w.reg.overrides[d.name]; ok && len(o.urls) > 0 {
			continue // an archive's own dependencies are not looked up
		}
		src, _, err := w.registryFile(d.name, version, "MODULE.bazel")
		if err != nil {
			return nil, fmt.Errorf("%s: bazel_dep %s %s: %v", d.pos, d.name, version, err)
		}
		deps, err := moduleDeps(d.name+"@"+version+"/MODULE.bazel", src)
		if err != nil {
			return nil, err
		}
		queue = append(queue, deps...)
	}
	repos := map[string]localRepo{}
	repoNames := map[string]string{}
	for _, d := range wanted {
		repoNames[d.name] = d.repo
	}
	for _, name := range slices.Sorted(maps.Keys(selected)) {
		version := selected[name]
		repo := name
		if r, ok := repoNames[name]; ok {
			repo = r
		}
		if o, ok := w.reg.overrides[name]; ok && len(o.urls) > 0 {
			continue // an archive's MODULE.bazel is in the archive
		}
		src, _, err := w.registryFile(name, version, "MODULE.bazel")
		if err != nil {
			return nil, err
		}
		if err := w.reg.readDepModule(name, repo, name+"@"+version+"/MODULE.bazel", src); err != nil {
			return nil, err
		}
		w.reg.modules[len(w.reg.modules)-1].version = version
	}
	for name, version := range selected {
		name, version := name, version
		repo := name
		if r, ok := repoNames[name]; ok {
			repo = r
		}
		repos[repo] = localRepo{pos: "module " + name + "@" + version, lazy: &lazyDir{get: func() (string, error) {
			return w.fetchModule(name, version)
		}}}
	}
	return repos, nil
}

// registryFile reads modules/NAME/VERSION/FILE from the first registry
// that has it, and says which.
func (w *Workspace) registryFile(name, version, file string) ([]byte, string, error) {
	var errs []string
	for _, reg := range w.cfg.Registries {
		u := strings.TrimSuffix(reg, "/") + "/modules/" + url.PathEscape(name) + "/" + url.PathEscape(version) + "/" + file
		b, err := fetchURL(u)
		if err == nil {
			return b, reg, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, "", fmt.Errorf("no registry has %s %s: %s", name, version, strings.Join(errs, "; "))
}

// moduleDeps are the bazel_deps of a dependency's MODULE.bazel; the rest
// of it is read and has no effect.
func moduleDeps(file string, src []byte) ([]moduleDep, error) {
	var deps []moduleDep
	env := starlark.StringDict{
		"bazel_dep": bazelDep(func(d moduleDep, dev bool) {
			if !dev {
				deps = append(deps, d)
			}
		}),
	}
	for _, name := range append(slices.Clone(moduleCalls), "module", "register_toolchains", "register_execution_platforms", "use_extension",
		"use_repo", "use_repo_rule", "local_path_override", "single_version_override", "archive_override") {
		env[name] = anyValue{}
	}
	thread := &starlark.Thread{Name: file}
	defer guard.Track(thread)()
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, file, src, env); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return deps, nil
}

// bazelDep is MODULE.bazel's bazel_dep, giving each dependency to add.
func bazelDep(add func(d moduleDep, dev bool)) *starlark.Builtin {
	return starlark.NewBuiltin("bazel_dep", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, version, repoName string
		var level int
		var dev bool
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "version?", &version, "max_compatibility_level?", &level,
			"repo_name?", &repoName, "dev_dependency?", &dev); err != nil {
			return nil, err
		}
		if repoName == "" {
			repoName = name
		}
		add(moduleDep{name: name, version: version, repo: repoName, pos: t.CallFrame(1).Pos.String()}, dev)
		return starlark.None, nil
	})
}

// anyValue takes any call and attribute, for the parts of a dependency's
// MODULE.bazel that rbs does not read.
type anyValue struct{}

func (anyValue) String() string        { return "<ignored>" }
func (anyValue) Type() string          { return "ignored" }
func (anyValue) Freeze()               {}
func (anyValue) Truth() starlark.Bool  { return true }
func (anyValue) Hash() (uint32, error) { return 0, nil }
func (anyValue) Name() string          { return "ignored" }
func (anyValue) AttrNames() []string   { return nil }
func (anyValue) Attr(string) (starlark.Value, error) {
	return anyValue{}, nil
}
func (anyValue) CallInternal(*starlark.Thread, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return anyValue{}, nil
}

// sourceJSON is a registry's source.json of a module version.
type sourceJSON struct {
	Type        string            `json:"type"`
	URL         string            `json:"url"`
	MirrorURLs  []string          `json:"mirror_urls"`
	Integrity   string            `json:"integrity"`
	StripPrefix string            `json:"strip_prefix"`
	Patches     map[string]string `json:"patches"`
	PatchStrip  int               `json:"patch_strip"`
	Path        string            `json:"path"` // type local_path
}

// fetchModule makes the repository of module name at version: from its
// archive_override, or from the registry's source.json, with the
// registry's patches and then the override's.
func (w *Workspace) fetchModule(name, version string) (string, error) {
	o := w.reg.overrides[name]
	src := sourceJSON{URL: "", Integrity: o.integrity, StripPrefix: o.strip, PatchStrip: o.patchStrip}
	var registry string
	if len(o.urls) == 0 {
		b, reg, err := w.registryFile(name, version, "source.json")
		if err != nil {
			return "", fmt.Errorf("module %s %s: %v", name, version, err)
		}
		if err := json.Unmarshal(b, &src); err != nil {
			return "", fmt.Errorf("module %s %s: source.json: %v", name, version, err)
		}
		registry = reg
		if src.Type != "" && src.Type != "archive" {
			return "", fmt.Errorf("module %s %s: source.json type %q: rbs fetches archives", name, version, src.Type)
		}
	}
	urls := append([]string{src.URL}, src.MirrorURLs...)
	if len(o.urls) > 0 {
		urls = o.urls
	}
	spec := &repoSpec{name: name, pos: "module " + name + "@" + version, rule: &RepositoryRule{name: "module"},
		attrs: starlark.StringDict{"version": starlark.String(version), "urls": starlark.String(strings.Join(urls, " ")),
			"integrity": starlark.String(src.Integrity), "strip_prefix": starlark.String(src.StripPrefix)}}
	dir := filepath.Join(w.cfg.RepoDir, name+"-"+spec.digest(w.loader))
	if _, err := os.Stat(filepath.Join(dir, fetchedMarker)); err == nil {
		return dir, nil
	}
	return w.make(dir, func(tmp string) error {
		c := &repoContext{ws: w, dir: tmp}
		sum, err := parseChecksum("", src.Integrity)
		if err != nil {
			return err
		}
		archive, _, err := c.download(urls, sum)
		if err != nil {
			return err
		}
		if err := extractArchive(archive, archiveType(urls[0]), tmp, src.StripPrefix); err != nil {
			return err
		}
		var names []string
		for p := range src.Patches {
			names = append(names, p)
		}
		sort.Strings(names)
		for _, p := range names {
			body, _, err := w.registryFile(name, version, "patches/"+p)
			if err != nil {
				return err
			}
			sum, err := parseChecksum("", src.Patches[p])
			if err != nil {
				return fmt.Errorf("patch %s: %v", p, err)
			}
			h := sum.hasher()
			h.Write(body)
			if string(h.Sum(nil)) != string(sum.want) {
				return fmt.Errorf("patch %s of %s: checksum mismatch", p, registry)
			}
			f := filepath.Join(tmp, ".rbs-patch")
			if err := os.WriteFile(f, body, 0o644); err != nil {
				return err
			}
			if err := applyPatch(tmp, f, src.PatchStrip); err != nil {
				return err
			}
			os.Remove(f)
		}
		for _, p := range o.patches {
			file, err := c.resolve(labelsIn(starlark.String(p), ""))
			if err != nil {
				return fmt.Errorf("%s: patch %s: %v", o.pos, p, err)
			}
			if err := applyPatch(tmp, file, o.patchStrip); err != nil {
				return err
			}
		}
		return nil
	})
}

// compareVersions orders two module versions as Bazel does: the release
// part by its dot-separated identifiers (numbers numerically, before
// words), a version with a prerelease (-...) before the same without.
func compareVersions(a, b string) int {
	ra, pa, _ := strings.Cut(strings.SplitN(a, "+", 2)[0], "-")
	rb, pb, _ := strings.Cut(strings.SplitN(b, "+", 2)[0], "-")
	if c := compareIdentifiers(ra, rb); c != 0 {
		return c
	}
	switch {
	case pa == pb:
		return 0
	case pa == "":
		return 1
	case pb == "":
		return -1
	}
	return compareIdentifiers(pa, pb)
}

func compareIdentifiers(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		na, ea := strconv.Atoi(as[i])
		nb, eb := strconv.Atoi(bs[i])
		switch {
		case ea == nil && eb == nil && na != nb:
			if na < nb {
				return -1
			}
			return 1
		case ea == nil && eb != nil:
			return -1
		case ea != nil && eb == nil:
			return 1
		case ea != nil && eb != nil && as[i] != bs[i]:
			return strings.Compare(as[i], bs[i])
		}
	}
	return len(as) - len(bs)
}
