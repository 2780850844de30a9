package merkle

import (
	"errors"
	"fmt"
	"path"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
)

// maxFollows is how many symlinks the resolution of one path may go
// through, as Linux's MAXSYMLINKS: one more is "too many levels of symbolic
// links".
const maxFollows = 40

// MaxTreeEntries bounds the files, directories and symlinks an input root
// holds once laid out on disk, where a Directory named twice is laid out
// twice: a DAG of a few hundred bytes can name 2^40 paths.
const MaxTreeEntries = 1 << 20

var (
	errEscapes = errors.New("escapes the input root")
	errLoop    = fmt.Errorf("goes through more than %d symlinks (a loop?)", maxFollows)
)

// CheckTree validates an input root, given as its Directory messages by
// digest, before anything of it is staged: every entry name is a plain name
// (not empty, ".", "..", nor with a slash or NUL) used once in its
// directory, every digest is valid, every subdirectory is in dirs, and every
// symlink has a relative target that, resolved as the kernel will resolve
// it once the tree is on disk, stays inside the root. Resolution goes
// through the tree's other symlinks (so "e -> d/l/.." escapes when
// "d/l -> .."), counts every link it follows against maxFollows (loops
// fail), and treats the part of a target past a name the tree does not
// hold as a plain path, since the command may create that name.
func CheckTree(root digest.Digest, dirs map[digest.Digest]*repb.Directory) error {
	c := &treeCheck{dirs: dirs, hasLinks: map[digest.Digest]bool{}, targets: true}
	if err := c.layout(root); err != nil {
		return err
	}
	return c.checkLinks(&node{dir: dirs[root], digest: root})
}

// CheckLayout validates what CheckTree does but where symlinks lead: names,
// digests, completeness and size. It is enough for a tree laid out by name
// whose symlinks are made but never followed, such as a job's outputs
// downloaded, where a link may point anywhere.
func CheckLayout(root digest.Digest, dirs map[digest.Digest]*repb.Directory) error {
	return (&treeCheck{dirs: dirs, hasLinks: map[digest.Digest]bool{}}).layout(root)
}

func (c *treeCheck) layout(root digest.Digest) error {
	if err := c.validate(root, "", map[digest.Digest]bool{}); err != nil {
		return err
	}
	if n := c.entries(root, map[digest.Digest]int64{}); n > MaxTreeEntries {
		return fmt.Errorf("the tree holds more than %d entries once laid out", MaxTreeEntries)
	}
	return nil
}

type treeCheck struct {
	dirs     map[digest.Digest]*repb.Directory
	hasLinks map[digest.Digest]bool // whether a directory's subtree holds symlinks
	targets  bool                   // whether symlink targets must stay inside
}

// validate checks the names and digests of the directory d, first seen at
// p, and of its subdirectories, each distinct Directory once, and records
// which hold symlinks.
func (c *treeCheck) validate(d digest.Digest, p string, seen map[digest.Digest]bool) error {
	if seen[d] {
		return nil
	}
	seen[d] = true
	dir, ok := c.dirs[d]
	if !ok {
		return fmt.Errorf("input directory %q: Directory %s is not in the tree", p, d)
	}
	names := map[string]bool{}
	claim := func(name string) error {
		if err := checkName(name); err != nil {
			return fmt.Errorf("input directory %q: %w", p, err)
		}
		if names[name] {
			return fmt.Errorf("input directory %q: %q appears twice", p, name)
		}
		names[name] = true
		return nil
	}
	for _, f := range dir.Files {
		if err := claim(f.Name); err != nil {
			return err
		}
		if _, err := digest.FromProto(f.Digest); err != nil {
			return fmt.Errorf("input file %q: %w", path.Join(p, f.Name), err)
		}
	}
	for _, s := range dir.Symlinks {
		if err := claim(s.Name); err != nil {
			return err
		}
		switch at := path.Join(p, s.Name); {
		case !c.targets && s.Target != "" && !strings.ContainsRune(s.Target, '\x00'):
		case s.Target == "":
			return fmt.Errorf("input symlink %q has an empty target", at)
		case strings.HasPrefix(s.Target, "/"):
			return fmt.Errorf("input symlink %q -> %q: the target is absolute", at, s.Target)
		case strings.ContainsRune(s.Target, '\x00'):
			return fmt.Errorf("input symlink %q -> %q: the target contains NUL", at, s.Target)
		}
	}
	links := len(dir.Symlinks) > 0
	for _, sub := range dir.Directories {
		if err := claim(sub.Name); err != nil {
			return err
		}
		sd, err := digest.FromProto(sub.Digest)
		if err != nil {
			return fmt.Errorf("input directory %q: %w", path.Join(p, sub.Name), err)
		}
		if err := c.validate(sd, path.Join(p, sub.Name), seen); err != nil {
			return err
		}
		links = links || c.hasLinks[sd]
	}
	c.hasLinks[d] = links
	return nil
}

// entries counts the entries under d as laid out on disk, each distinct
// Directory counted once and its count reused, saturating above
// MaxTreeEntries. validate has checked the digests.
func (c *treeCheck) entries(d digest.Digest, memo map[digest.Digest]int64) int64 {
	if n, ok := memo[d]; ok {
		return n
	}
	dir := c.dirs[d]
	n := int64(len(dir.Files) + len(dir.Symlinks) + len(dir.Directories))
	for _, sub := range dir.Directories {
		sd, _ := digest.FromProto(sub.Digest)
		n = min(n+c.entries(sd, memo), MaxTreeEntries+1)
	}
	memo[d] = n
	return n
}

// checkName validates one entry name of a Directory.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty file name")
	case name == "." || name == "..":
		return fmt.Errorf("file name %q is not allowed", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("file name %q contains a slash or NUL", name)
	}
	return nil
}

// node is one entry of the tree at one place in it: the same Directory
// message at two places is two nodes, as ".." leads to different parents.
// Nodes are made only where the check looks.
type node struct {
	parent *node
	path   string // in the root; "" for the root

	// A directory has its message; a symlink its target; a file neither.
	dir      *repb.Directory
	digest   digest.Digest
	children map[string]*node
	target   string

	// Of a symlink: where it resolves to and through how many links
	// (itself included), once resolved.
	state   resolveState
	to      place
	follows int
	err     error
}

type resolveState int

const (
	unresolved resolveState = iota
	resolving
	resolved
)

// place is where a resolution has got to: a directory of the tree, and how
// many names below it the path has gone that the tree does not hold as
// directories (absent, or files).
type place struct {
	dir   *node
	below int
}

func (n *node) isLink() bool { return n.dir == nil && n.target != "" }

// child returns the entry name of the directory n, or nil.
func (c *treeCheck) child(n *node, name string) *node {
	if n.children == nil {
		n.children = map[string]*node{}
		for _, f := range n.dir.Files {
			n.children[f.Name] = &node{parent: n, path: path.Join(n.path, f.Name)}
		}
		for _, s := range n.dir.Symlinks {
			n.children[s.Name] = &node{parent: n, path: path.Join(n.path, s.Name), target: s.Target}
		}
		for _, sub := range n.dir.Directories {
			sd, _ := digest.FromProto(sub.Digest) // validated
			n.children[sub.Name] = &node{parent: n, path: path.Join(n.path, sub.Name), dir: c.dirs[sd], digest: sd}
		}
	}
	return n.children[name]
}

// checkLinks resolves every symlink in the directory n and below it.
func (c *treeCheck) checkLinks(n *node) error {
	if !c.hasLinks[n.digest] {
		return nil
	}
	for _, s := range n.dir.Symlinks {
		l := c.child(n, s.Name)
		if _, _, err := c.resolve(l); err != nil {
			return fmt.Errorf("input symlink %q -> %q %w", l.path, l.target, err)
		}
	}
	for _, sub := range n.dir.Directories {
		if err := c.checkLinks(c.child(n, sub.Name)); err != nil {
			return err
		}
	}
	return nil
}

// resolve returns where the symlink l leads and how many links that
// follows, resolving it once.
func (c *treeCheck) resolve(l *node) (place, int, error) {
	switch l.state {
	case resolved:
		return l.to, l.follows, l.err
	case resolving:
		return place{}, 0, errLoop
	}
	l.state = resolving
	to, follows, err := c.walk(place{dir: l.parent}, l.target)
	follows++
	if err == nil && follows > maxFollows {
		err = errLoop
	}
	l.state, l.to, l.follows, l.err = resolved, to, follows, err
	return to, follows, err
}

// walk follows the relative path p from at, as the kernel would.
func (c *treeCheck) walk(at place, p string) (place, int, error) {
	follows := 0
	for _, name := range strings.Split(p, "/") {
		switch {
		case name == "" || name == ".":
		case name == ".." && at.below > 0:
			at.below--
		case name == "..":
			if at.dir.parent == nil {
				return place{}, 0, errEscapes
			}
			at.dir = at.dir.parent
		case at.below > 0:
			at.below++
		default:
			n := c.child(at.dir, name)
			switch {
			case n == nil || n.dir == nil && !n.isLink():
				at.below = 1
			case n.isLink():
				to, f, err := c.resolve(n)
				if err != nil {
					return place{}, 0, err
				}
				if follows += f; follows > maxFollows {
					return place{}, 0, errLoop
				}
				at = to
			default:
				at.dir = n
			}
		}
	}
	return at, follows, nil
}
