package blobstore

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/rbs-build/rbs/jobs/units"
)

// Spec is a parsed store spec, the text that names a chain of backends, for
// the CAS and for the action cache alike:
//
//	SPEC    = disk | grpc | s3 | shard | mirror | cache
//	disk    = "disk:" DIR [ "?max_size=" SIZE ]
//	grpc    = ( "grpc://" | "grpcs://" ) HOST ":" PORT [ "/" INSTANCE ]
//	          [ "?" PARAM { "&" PARAM } ]      PARAM: token_file=FILE, ca=FILE
//	s3      = "s3://" BUCKET [ "/" PREFIX ] [ "?" PARAM { "&" PARAM } ]
//	                                           PARAM: endpoint=URL, region=REGION
//	shard   = "shard(" [ WEIGHT "*" ] SPEC { "," [ WEIGHT "*" ] SPEC } ")"   two or more
//	mirror  = "mirror(" SPEC "," SPEC ")"
//	cache   = "cache(" disk "," SPEC ")"
//
// SIZE is as jobs/units reads it (50GiB, 512M); WEIGHT is a whole number
// from 1 to 1000000, 1 when left out. Spaces are allowed around the backends
// of a combinator and around '*', not inside a backend. A backend's text runs
// to the next ',' or ')', so a directory, file, instance or URL in a spec
// cannot hold spaces, ',', '(' or ')' (nor '?', which starts the
// parameters), and parameters are not %-decoded. No disk directory may
// appear twice in a spec, nor one backend twice in a shard or a mirror.
//
// Parse reads the text into a tree of *DiskSpec, *GRPCSpec, *S3Spec,
// *ShardSpec, *MirrorSpec and *CacheSpec; Open builds the Store. String
// gives a Spec back as canonical text that Parse reads to the same tree.
type Spec interface {
	fmt.Stringer
	// shardName identifies the backend among a shard's: what decides
	// where its keys are, leaving out what does not (a size bound, a
	// token file).
	shardName() string
}

// UnsetSize is DiskSpec.MaxSize when the spec names no max_size, so that
// Options.DiskMaxSize applies.
const UnsetSize = -1

// DiskSpec is disk:DIR, a Disk.
type DiskSpec struct {
	Dir string
	// MaxSize is the Disk's bound in bytes: 0 for none, UnsetSize when
	// not given.
	MaxSize int64
}

// GRPCSpec is grpc://HOST:PORT/INSTANCE, another REAPI server's CAS or
// action cache (a Remote or a RemoteActionCache).
type GRPCSpec struct {
	TLS      bool   // grpcs://
	Addr     string // HOST:PORT
	Instance string
	// TokenFile holds the bearer token to send; "" sends Options.Token.
	TokenFile string
	// CACert is a PEM file of the CA of the server's certificate.
	CACert string
}

// S3Spec is s3://BUCKET/PREFIX, an S3-compatible bucket.
type S3Spec struct {
	Bucket   string
	Prefix   string // of the objects' keys, without a trailing '/'
	Endpoint string // URL; "" for AWS's
	Region   string
}

// WeightedSpec is a backend of a shard with its weight.
type WeightedSpec struct {
	Weight int
	Spec   Spec
}

// ShardSpec is shard(A,B,...), a Shard.
type ShardSpec struct{ Backends []WeightedSpec }

// MirrorSpec is mirror(A,B), a Mirror.
type MirrorSpec struct{ A, B Spec }

// CacheSpec is cache(disk:DIR, REMOTE), a Cache.
type CacheSpec struct {
	Disk   *DiskSpec
	Remote Spec
}

func (s *DiskSpec) String() string {
	if s.MaxSize == UnsetSize {
		return "disk:" + s.Dir
	}
	return "disk:" + s.Dir + "?max_size=" + units.Size(s.MaxSize).String()
}

func (s *GRPCSpec) target() string {
	if s.TLS {
		return "grpcs://" + s.Addr
	}
	return "grpc://" + s.Addr
}

func (s *GRPCSpec) String() string {
	t := s.target()
	if s.Instance != "" {
		t += "/" + s.Instance
	}
	return t + params("token_file", s.TokenFile, "ca", s.CACert)
}

func (s *S3Spec) String() string {
	t := "s3://" + s.Bucket
	if s.Prefix != "" {
		t += "/" + s.Prefix
	}
	return t + params("endpoint", s.Endpoint, "region", s.Region)
}

// params formats the non-empty of the name-value pairs kv as a query.
func params(kv ...string) string {
	var q []string
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] != "" {
			q = append(q, kv[i]+"="+kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + strings.Join(q, "&")
}

func (s *ShardSpec) String() string {
	parts := make([]string, len(s.Backends))
	for i, b := range s.Backends {
		parts[i] = b.Spec.String()
		if b.Weight != 1 {
			parts[i] = strconv.Itoa(b.Weight) + "*" + parts[i]
		}
	}
	return "shard(" + strings.Join(parts, ",") + ")"
}

func (s *MirrorSpec) String() string { return "mirror(" + s.A.String() + "," + s.B.String() + ")" }
func (s *CacheSpec) String() string {
	return "cache(" + s.Disk.String() + "," + s.Remote.String() + ")"
}

func (s *DiskSpec) shardName() string { return "disk:" + filepath.Clean(s.Dir) }
func (s *GRPCSpec) shardName() string { return strings.SplitN(s.String(), "?", 2)[0] }
func (s *S3Spec) shardName() string   { return s.String() }
func (s *ShardSpec) shardName() string {
	parts := make([]string, len(s.Backends))
	for i, b := range s.Backends {
		parts[i] = strconv.Itoa(b.Weight) + "*" + b.Spec.shardName()
	}
	return "shard(" + strings.Join(parts, ",") + ")"
}
func (s *MirrorSpec) shardName() string {
	return "mirror(" + s.A.shardName() + "," + s.B.shardName() + ")"
}
func (s *CacheSpec) shardName() string { return s.Remote.shardName() }

// DiskDirs lists the directories of the disk backends in s, for checking
// that two stores do not share one.
func DiskDirs(s Spec) []string {
	switch s := s.(type) {
	case *DiskSpec:
		return []string{filepath.Clean(s.Dir)}
	case *ShardSpec:
		var dirs []string
		for _, b := range s.Backends {
			dirs = append(dirs, DiskDirs(b.Spec)...)
		}
		return dirs
	case *MirrorSpec:
		return append(DiskDirs(s.A), DiskDirs(s.B)...)
	case *CacheSpec:
		return append(DiskDirs(s.Disk), DiskDirs(s.Remote)...)
	}
	return nil
}

// SpecError is a store spec that does not parse.
type SpecError struct {
	Spec   string // the whole text
	Column int    // of the trouble, from 1
	Msg    string
}

func (e *SpecError) Error() string { return fmt.Sprintf("%q: %s (column %d)", e.Spec, e.Msg, e.Column) }

// Parse reads a store spec (see Spec for the grammar), checking every value
// in it: sizes, addresses, bucket names, URLs, the number of backends each
// combinator takes, and that no disk directory is named twice.
func Parse(text string) (Spec, error) {
	p := &parser{text: text, dirs: map[string]int{}}
	s, _, err := p.backend(false)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.text) {
		return nil, p.errorf(p.pos, "unexpected %q after the spec", p.text[p.pos:])
	}
	return s, nil
}

type parser struct {
	text string
	pos  int
	dirs map[string]int // disk directories seen, to their columns
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &SpecError{Spec: p.text, Column: pos + 1, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) space() {
	for p.pos < len(p.text) && (p.text[p.pos] == ' ' || p.text[p.pos] == '\t') {
		p.pos++
	}
}

const backends = "disk:DIR, grpc://HOST:PORT, grpcs://HOST:PORT, s3://BUCKET, shard(...), mirror(A,B) or cache(disk:DIR,REMOTE)"

// backend reads one backend, with a weight when weighted (in a shard).
func (p *parser) backend(weighted bool) (Spec, int, error) {
	p.space()
	start := p.pos
	weight := 1
	digits := start
	for digits < len(p.text) && p.text[digits] >= '0' && p.text[digits] <= '9' {
		digits++
	}
	star := digits
	for star < len(p.text) && (p.text[star] == ' ' || p.text[star] == '\t') {
		star++
	}
	if digits > start && star < len(p.text) && p.text[star] == '*' {
		w := p.text[start:digits]
		if !weighted {
			return nil, 0, p.errorf(start, "weight %s* outside shard(...): only a shard's backends have weights", w)
		}
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 || n > 1000000 {
			return nil, 0, p.errorf(start, "weight %q: want a whole number from 1 to 1000000", w)
		}
		weight = n
		p.pos = star + 1
		p.space()
		start = p.pos
	}
	name := start
	for name < len(p.text) && (p.text[name] >= 'a' && p.text[name] <= 'z' || p.text[name] >= '0' && p.text[name] <= '9') {
		name++
	}
	if name < len(p.text) && p.text[name] == '(' {
		s, err := p.combinator(p.text[start:name], start, name+1)
		return s, weight, err
	}
	end := start
	for end < len(p.text) && !strings.ContainsRune(",()", rune(p.text[end])) {
		end++
	}
	leaf := strings.TrimRight(p.text[start:end], " \t")
	if end < len(p.text) && p.text[end] == '(' {
		return nil, 0, p.errorf(end, "unexpected '(' in %q: want %s", p.text[start:end+1], backends)
	}
	if leaf == "" {
		return nil, 0, p.errorf(start, "missing backend: want %s", backends)
	}
	if i := strings.IndexAny(leaf, " \t"); i >= 0 {
		return nil, 0, p.errorf(start+i, "unexpected space in %q: separate backends with ','", leaf)
	}
	p.pos = end
	s, err := p.leaf(leaf, start)
	return s, weight, err
}

// combinator reads the backends of name( opened at start, the first at pos.
func (p *parser) combinator(name string, start, pos int) (Spec, error) {
	if name != "shard" && name != "mirror" && name != "cache" {
		return nil, p.errorf(start, "unknown backend %q: want %s", name+"(", backends)
	}
	p.pos = pos
	var args []WeightedSpec
	var cols []int
	p.space()
	if p.pos < len(p.text) && p.text[p.pos] == ')' {
		p.pos++
	} else {
		for {
			p.space()
			col := p.pos
			s, w, err := p.backend(name == "shard")
			if err != nil {
				return nil, err
			}
			args, cols = append(args, WeightedSpec{Weight: w, Spec: s}), append(cols, col)
			p.space()
			if p.pos >= len(p.text) {
				return nil, p.errorf(start, "%s( is never closed: want ')'", name)
			}
			c := p.text[p.pos]
			p.pos++
			if c == ')' {
				break
			}
			if c != ',' {
				return nil, p.errorf(p.pos-1, "unexpected %q in %s(...): want ',' or ')'", c, name)
			}
		}
	}
	switch name {
	case "shard":
		if len(args) < 2 {
			return nil, p.errorf(start, "shard takes two backends or more, got %d", len(args))
		}
		seen := map[string]bool{}
		for i, a := range args {
			n := a.Spec.shardName()
			if seen[n] {
				return nil, p.errorf(cols[i], "shard has backend %s twice", n)
			}
			seen[n] = true
		}
		return &ShardSpec{Backends: args}, nil
	case "mirror":
		if len(args) != 2 {
			return nil, p.errorf(start, "mirror takes exactly two backends, got %d", len(args))
		}
		if args[0].Spec.shardName() == args[1].Spec.shardName() {
			return nil, p.errorf(cols[1], "mirror's two backends are the same, %s", args[1].Spec)
		}
		return &MirrorSpec{A: args[0].Spec, B: args[1].Spec}, nil
	default:
		if len(args) != 2 {
			return nil, p.errorf(start, "cache takes exactly two backends, a disk:DIR and the remote, got %d", len(args))
		}
		disk, ok := args[0].Spec.(*DiskSpec)
		if !ok {
			return nil, p.errorf(cols[0], "cache's first backend must be a disk:DIR, got %s", args[0].Spec)
		}
		return &CacheSpec{Disk: disk, Remote: args[1].Spec}, nil
	}
}

// leaf reads the backend text at column pos.
func (p *parser) leaf(text string, pos int) (Spec, error) {
	scheme, rest, _ := strings.Cut(text, ":")
	switch {
	case scheme == "disk":
		return p.disk(text, rest, pos)
	case (scheme == "grpc" || scheme == "grpcs") && strings.HasPrefix(rest, "//"):
		return p.grpc(text, scheme == "grpcs", rest[2:], pos)
	case scheme == "s3" && strings.HasPrefix(rest, "//"):
		return p.s3(text, rest[2:], pos)
	}
	return nil, p.errorf(pos, "unknown backend %q: want %s", text, backends)
}

// query reads the parameters of the backend text, allowing only the names
// in allowed, each once.
func (p *parser) query(text, q string, pos int, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	if q == "" {
		return out, nil
	}
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		switch {
		case !ok:
			return nil, p.errorf(pos, "%s: unknown parameter %q (want %s)", text, k, strings.Join(allowed, ", "))
		case v == "":
			return nil, p.errorf(pos, "%s: parameter %s has no value", text, k)
		case out[k] != "":
			return nil, p.errorf(pos, "%s: parameter %s given twice", text, k)
		}
		out[k] = v
	}
	return out, nil
}

func (p *parser) disk(text, rest string, pos int) (Spec, error) {
	dir, q, _ := strings.Cut(rest, "?")
	if dir == "" {
		return nil, p.errorf(pos, "%s: want disk:DIR, a directory", text)
	}
	params, err := p.query(text, q, pos, "max_size")
	if err != nil {
		return nil, err
	}
	s := &DiskSpec{Dir: dir, MaxSize: UnsetSize}
	if v, ok := params["max_size"]; ok {
		size, err := units.ParseSize(v)
		if err != nil {
			return nil, p.errorf(pos, "%s: max_size: %v", text, err)
		}
		s.MaxSize = int64(size)
	}
	clean := filepath.Clean(dir)
	if col, ok := p.dirs[clean]; ok {
		return nil, p.errorf(pos, "disk directory %s is already used at column %d: every disk backend needs its own", dir, col)
	}
	p.dirs[clean] = pos + 1
	return s, nil
}

func (p *parser) grpc(text string, tls bool, rest string, pos int) (Spec, error) {
	loc, q, _ := strings.Cut(rest, "?")
	addr, instance, _ := strings.Cut(loc, "/")
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return nil, p.errorf(pos, "%s: %q is not HOST:PORT", text, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, p.errorf(pos, "%s: port %q: want a number from 1 to 65535", text, port)
	}
	if strings.HasPrefix(instance, "/") || strings.HasSuffix(instance, "/") || strings.Contains(instance, "//") ||
		instance == "" && strings.Contains(loc, "/") {
		return nil, p.errorf(pos, "%s: instance name %q has an empty segment", text, instance)
	}
	params, err := p.query(text, q, pos, "token_file", "ca")
	if err != nil {
		return nil, err
	}
	return &GRPCSpec{TLS: tls, Addr: addr, Instance: instance, TokenFile: params["token_file"], CACert: params["ca"]}, nil
}

// bucketName is what S3 allows a bucket to be called.
var bucketName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`) })

func (p *parser) s3(text, rest string, pos int) (Spec, error) {
	loc, q, _ := strings.Cut(rest, "?")
	bucket, prefix, _ := strings.Cut(loc, "/")
	if !bucketName().MatchString(bucket) || strings.Contains(bucket, "..") {
		return nil, p.errorf(pos, "%s: bucket %q: want 3 to 63 lower-case letters, digits, '.' and '-'", text, bucket)
	}
	params, err := p.query(text, q, pos, "endpoint", "region")
	if err != nil {
		return nil, err
	}
	s := &S3Spec{Bucket: bucket, Prefix: strings.Trim(prefix, "/"), Endpoint: params["endpoint"], Region: params["region"]}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, p.errorf(pos, "%s: endpoint %q: want an http:// or https:// URL", text, s.Endpoint)
		}
	}
	return s, nil
}
