// Package bazelrc reads Bazel's run-command files, .bazelrc, for rbs's
// build commands, and expands a command line with them as Bazel does.
//
// A file is lines of words split as a Bourne shell splits them (quotes,
// backslashes, a backslash at the end of a line joining the next, # to the
// end of the line a comment). A line is one of:
//
//	COMMAND FLAGS...         flags every COMMAND command line begins with
//	COMMAND:NAME FLAGS...    flags --config=NAME stands for
//	import PATH              another file read in place: it must exist
//	try-import PATH          the same, skipped when absent
//
// In an import's path %workspace% is the workspace's directory; a relative
// path is from the directory the command runs in. COMMAND is "common"
// (every command) or a command's name; a command takes the lines of the
// commands it inherits from too (test and run those of build), most general
// first, and of one command the files' lines in the order read.
package bazelrc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// line is one line of flags: COMMAND or COMMAND:CONFIG.
type line struct {
	file    string
	num     int
	command string
	config  string
	words   []string
}

func (l line) where() string { return fmt.Sprintf("%s:%d", l.file, l.num) }

// RC is what the files read hold.
type RC struct {
	lines []line
	// HostOS names this machine's OS as Bazel's platform-specific
	// configs do (linux, macos, windows, freebsd, openbsd): with
	// --enable_platform_specific_config, COMMAND:HostOS lines apply.
	HostOS string
	// Announce, when --announce_rc is given, is told what the rc files
	// gave, in Bazel's words, a line at a time.
	Announce func(string)
}

// File is an rc file to read: Optional ones may be absent.
type File struct {
	Path     string
	Optional bool
}

// Read reads files in order, each with its imports in place. workspace
// replaces %workspace% in imports ("" outside a workspace, where an import
// that names it fails); relative imports are from dir.
func Read(files []File, workspace, dir string) (*RC, error) {
	rc := &RC{}
	for _, f := range files {
		if err := rc.read(f, workspace, dir, nil); err != nil {
			return nil, err
		}
	}
	return rc, nil
}

func (rc *RC) read(f File, workspace, dir string, importing []string) error {
	path, err := filepath.Abs(f.Path)
	if err != nil {
		return err
	}
	if i := slices.Index(importing, path); i >= 0 {
		return fmt.Errorf("%s imports itself: %s", path, strings.Join(append(importing[i:], path), " -> "))
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && f.Optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", f.Path, err)
	}
	lines, err := split(string(data))
	if err != nil {
		return fmt.Errorf("%s:%w", path, err)
	}
	for _, l := range lines {
		l.file = path
		switch l.command {
		case "import", "try-import":
			if len(l.words) != 1 {
				return fmt.Errorf("%s: %s takes one path, not %d words", l.where(), l.command, len(l.words))
			}
			p := l.words[0]
			if strings.Contains(p, "%workspace%") {
				if workspace == "" {
					return fmt.Errorf("%s: %s %s: not in a workspace", l.where(), l.command, p)
				}
				p = strings.ReplaceAll(p, "%workspace%", workspace)
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			if err := rc.read(File{Path: p, Optional: l.command == "try-import"}, workspace, dir, append(importing, path)); err != nil {
				return err
			}
		default:
			l.command, l.config, _ = strings.Cut(l.command, ":")
			rc.lines = append(rc.lines, l)
		}
	}
	return nil
}

// split reads a file's lines into words; each line's first word is its
// command, the rest its words. An error says "LINE: what".
func split(text string) ([]line, error) {
	var lines []line
	var cur line
	var word strings.Builder
	inWord := false
	num := 1
	end := func() {
		if inWord {
			if cur.command == "" && cur.words == nil {
				cur.command = word.String()
				cur.words = []string{}
			} else {
				cur.words = append(cur.words, word.String())
			}
		}
		word.Reset()
		inWord = false
	}
	endLine := func() {
		end()
		if cur.command != "" {
			lines = append(lines, cur)
		}
		cur = line{}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if cur.command == "" && cur.words == nil && !inWord {
			cur.num = num
		}
		switch {
		case c == '\n':
			endLine()
			num++
		case c == ' ' || c == '\t' || c == '\r':
			end()
		case c == '#' && !inWord:
			for i < len(text) && text[i] != '\n' {
				i++
			}
			i--
		case c == '\\':
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
				num++
				continue
			}
			if i+1 < len(text) {
				i++
				word.WriteByte(text[i])
			}
			inWord = true
		case c == '\'' || c == '"':
			j := i + 1
			for ; j < len(text) && text[j] != c; j++ {
				if c == '"' && text[j] == '\\' && j+1 < len(text) && strings.IndexByte("\"\\$`\n", text[j+1]) >= 0 {
					j++
				}
				if text[j] == '\n' {
					num++
				}
				word.WriteByte(text[j])
			}
			if j == len(text) {
				return nil, fmt.Errorf("%d: the quote %c is not closed", cur.num, c)
			}
			i = j
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endLine()
	return lines, nil
}

// Kind is what a command says of a flag's name.
type Kind int

const (
	Unknown Kind = iota // the command does not take the flag
	Bool                // a flag that takes no value of its own word
	Value               // a flag whose value may be the next word
)

// Flags says what a command takes: name is a flag's name as written
// after its dashes, before any "=".
type Flags func(name string) Kind

// Expand returns args, the flags and arguments a command line gives after
// its command, with the rc files' flags for the commands of chain (the
// command and those it inherits from, most general first: "common",
// "build", "test") before them and each --config=NAME replaced by NAME's
// flags, in place, as Bazel expands them. Of the files' flags, those the
// command does not take are dropped: warn is told of each, with its file
// and line, once, unless ignore says it is one that is fine to drop (a
// flag of a "common" line that another command takes). A flag the command
// line gives itself is left for the command line's parser to refuse.
// Bazel's --noNAME, for a Bool flag NAME, becomes --NAME=false. Nothing
// after "--" is expanded.
//
// Two flags of Bazel's are the expansion's own, wherever they are given:
// --enable_platform_specific_config applies the COMMAND:HostOS lines, with
// the files' priority (after their plain lines, before the command line),
// and --announce_rc tells Announce what the files gave.
func (rc *RC) Expand(chain []string, args []string, flags Flags, ignore func(line string, name string) bool, warn func(string)) ([]string, error) {
	e := &expansion{rc: rc, chain: chain, flags: flags, ignore: ignore, warn: warn, warned: map[string]bool{}}
	var fromFiles []string
	var read []line
	for _, command := range chain {
		for _, l := range rc.lines {
			if l.command == command && l.config == "" {
				read = append(read, l)
				words, err := e.line(l, nil)
				if err != nil {
					return nil, err
				}
				fromFiles = append(fromFiles, words...)
			}
		}
	}
	e.readFrom(read)
	var fromArgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			fromArgs = append(fromArgs, args[i:]...)
			break
		}
		if e.own(a) {
			continue
		}
		name, ok := configName(args, &i)
		if !ok {
			fromArgs = append(fromArgs, a)
			continue
		}
		words, err := e.config(name, nil)
		if err != nil {
			return nil, err
		}
		fromArgs = append(fromArgs, words...)
	}
	if e.platformConfig && rc.HostOS != "" && e.has(rc.HostOS) {
		words, err := e.config(rc.HostOS, nil)
		if err != nil {
			return nil, err
		}
		fromFiles = append(fromFiles, words...)
	}
	if e.announceRC && rc.Announce != nil {
		for _, msg := range e.announced {
			rc.Announce(msg)
		}
	}
	return append(fromFiles, fromArgs...), nil
}

// own takes the flags the expansion acts on itself, --announce_rc and
// --enable_platform_specific_config (and their --no and =BOOL forms),
// saying whether w was one.
func (e *expansion) own(w string) bool {
	name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
	if !strings.HasPrefix(w, "--") {
		return false
	}
	on := !hasValue || value == "true" || value == "1" || value == "yes"
	if rest, ok := strings.CutPrefix(name, "no"); ok && !hasValue {
		name, on = rest, false
	}
	switch name {
	case "announce_rc":
		e.announceRC = on
	case "enable_platform_specific_config":
		e.platformConfig = on
	default:
		return false
	}
	return true
}

// has says whether a file has COMMAND:name lines for the chain.
func (e *expansion) has(name string) bool {
	for _, l := range e.rc.lines {
		if l.config == name && slices.Contains(e.chain, l.command) {
			return true
		}
	}
	return false
}

// readFrom notes, for --announce_rc, the plain lines the files gave, by
// file and command, as Bazel announces them.
func (e *expansion) readFrom(lines []line) {
	var files []string
	for _, l := range e.rc.lines {
		if !slices.Contains(files, l.file) {
			files = append(files, l.file)
		}
	}
	command := e.chain[len(e.chain)-1]
	for _, f := range files {
		var block []string
		for _, c := range e.chain {
			var words []string
			for _, l := range lines {
				if l.file == f && l.command == c {
					words = append(words, l.words...)
				}
			}
			if len(words) == 0 {
				continue
			}
			if c == command {
				block = append(block, fmt.Sprintf("  '%s' options: %s", c, strings.Join(words, " ")))
			} else {
				block = append(block, fmt.Sprintf("  Inherited '%s' options: %s", c, strings.Join(words, " ")))
			}
		}
		if len(block) > 0 {
			e.announced = append(e.announced, fmt.Sprintf("INFO: Reading rc options for '%s' from %s:", command, f))
			e.announced = append(e.announced, block...)
		}
	}
}

// configName reads a --config flag at args[*i], its value in the word or
// the next one (then *i moves on to it).
func configName(args []string, i *int) (string, bool) {
	a := args[*i]
	if v, ok := strings.CutPrefix(a, "--config="); ok {
		return v, true
	}
	if a == "--config" && *i+1 < len(args) {
		*i++
		return args[*i], true
	}
	return "", false
}

type expansion struct {
	rc     *RC
	chain  []string
	flags  Flags
	ignore func(string, string) bool
	warn   func(string)
	warned map[string]bool
	// announceRC and platformConfig are --announce_rc and
	// --enable_platform_specific_config; announced is what the former
	// tells.
	announceRC, platformConfig bool
	announced                  []string
}

// config is the flags --config=name stands for; configs are the ones
// being expanded, to find a config that includes itself.
func (e *expansion) config(name string, configs []string) ([]string, error) {
	if slices.Contains(configs, name) {
		return nil, fmt.Errorf("--config=%s includes itself: %s", name, strings.Join(append(configs, name), " -> "))
	}
	configs = append(configs, name)
	var out []string
	found := false
	for _, command := range e.chain {
		var lines []line
		for _, l := range e.rc.lines {
			if l.command == command && l.config == name {
				lines = append(lines, l)
			}
		}
		for i, l := range lines {
			found = true
			if i == 0 || lines[i-1].file != l.file {
				// As Bazel, a file's lines of the config are told
				// before the configs they name are expanded.
				var shown []string
				for _, m := range lines[i:] {
					if m.file != l.file {
						break
					}
					shown = append(shown, m.words...)
				}
				e.announced = append(e.announced, fmt.Sprintf("INFO: Found applicable config definition %s:%s in file %s: %s", command, name, l.file, strings.Join(shown, " ")))
			}
			words, err := e.line(l, configs)
			if err != nil {
				return nil, err
			}
			out = append(out, words...)
		}
	}
	if !found {
		lines := make([]string, len(e.chain))
		for i, c := range e.chain {
			lines[i] = c + ":" + name
		}
		return nil, fmt.Errorf("--config=%s: no rc file has a line for it (%s)", name, strings.Join(lines, ", "))
	}
	return out, nil
}

// line is the words of l the command takes, its --config flags expanded.
func (e *expansion) line(l line, configs []string) ([]string, error) {
	var out []string
	words := l.words
	for i := 0; i < len(words); i++ {
		w := words[i]
		if name, ok := configName(words, &i); ok {
			expanded, err := e.config(name, configs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.where(), err)
			}
			out = append(out, expanded...)
			continue
		}
		if e.own(w) {
			continue
		}
		rest, isFlag := strings.CutPrefix(w, "-")
		if !isFlag || w == "-" {
			out = append(out, w)
			continue
		}
		rest = strings.TrimPrefix(rest, "-")
		name, _, hasValue := strings.Cut(rest, "=")
		switch e.flags(name) {
		case Bool:
			out = append(out, w)
		case Value:
			out = append(out, w)
			if !hasValue && i+1 < len(words) {
				i++
				out = append(out, words[i])
			}
		default:
			if positive, ok := strings.CutPrefix(name, "no"); ok && !hasValue && e.flags(positive) == Bool {
				out = append(out, "--"+positive+"=false")
				continue
			}
			// The value of a flag rbs does not know may be the next word.
			if !hasValue && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++
			}
			if e.ignore != nil && e.ignore(l.command, name) {
				continue
			}
			if key := l.where() + " " + name; !e.warned[key] {
				e.warned[key] = true
				e.warn(fmt.Sprintf("%s: rbs %s does not take --%s; ignored", l.where(), e.chain[len(e.chain)-1], name))
			}
		}
	}
	return out, nil
}
