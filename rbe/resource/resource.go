// Package resource parses the ByteStream resource names of the Remote
// Execution API:
//
//	{instance}/blobs/{hash}/{size}
//	{instance}/compressed-blobs/{compressor}/{hash}/{size}
//	{instance}/uploads/{uuid}/blobs/{hash}/{size}{/metadata}
//	{instance}/uploads/{uuid}/compressed-blobs/{compressor}/{hash}/{size}{/metadata}
//
// where the instance name may be empty or span several segments, and an
// optional "sha256/" digest-function segment may precede the hash.
package resource

import (
	"fmt"
	"strconv"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
)

// Name is a parsed ByteStream resource name.
type Name struct {
	Instance   string
	UploadID   string // set for writes only
	Compressor repb.Compressor_Value
	Digest     digest.Digest
}

var reserved = map[string]bool{
	"blobs": true, "uploads": true, "actions": true, "actionResults": true,
	"operations": true, "capabilities": true, "compressed-blobs": true,
}

// Compressors maps the compressors this server supports to their names in
// resource names.
var Compressors = map[string]repb.Compressor_Value{"zstd": repb.Compressor_ZSTD}

// ParseRead parses the resource name of a ByteStream Read.
func ParseRead(s string) (Name, error) {
	segs := strings.Split(s, "/")
	i, err := instance(s, segs, "blobs", "compressed-blobs")
	if err != nil {
		return Name{}, err
	}
	n := Name{Instance: strings.Join(segs[:i], "/")}
	rest, err := n.parseBlob(s, segs[i:])
	if err != nil {
		return Name{}, err
	}
	if len(rest) != 0 {
		return Name{}, fmt.Errorf("invalid resource name %q: unexpected %q after the size", s, strings.Join(rest, "/"))
	}
	return n, nil
}

// ParseWrite parses the resource name of a ByteStream Write.
func ParseWrite(s string) (Name, error) {
	segs := strings.Split(s, "/")
	i, err := instance(s, segs, "uploads")
	if err != nil {
		return Name{}, err
	}
	n := Name{Instance: strings.Join(segs[:i], "/")}
	if i+1 >= len(segs) {
		return Name{}, fmt.Errorf("invalid resource name %q: missing upload id after \"uploads\"", s)
	}
	n.UploadID = segs[i+1]
	if err := checkSegment(s, n.UploadID); err != nil {
		return Name{}, err
	}
	// Anything after the size is implementation-specific metadata, ignored.
	if _, err := n.parseBlob(s, segs[i+2:]); err != nil {
		return Name{}, err
	}
	return n, nil
}

// instance finds the first segment that is one of kinds and returns its
// index, checking the instance-name segments before it.
func instance(s string, segs []string, kinds ...string) (int, error) {
	for i, seg := range segs {
		if reserved[seg] {
			for _, k := range kinds {
				if seg == k {
					return i, nil
				}
			}
			return 0, fmt.Errorf("invalid resource name %q: unexpected %q, want %s", s, seg, strings.Join(kinds, " or "))
		}
		if err := checkSegment(s, seg); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("invalid resource name %q: no %s segment", s, strings.Join(kinds, " or "))
}

func checkSegment(s, seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("invalid resource name %q: empty path segment", s)
	case seg == "." || seg == "..":
		return fmt.Errorf("invalid resource name %q: path segment %q is not allowed", s, seg)
	case strings.ContainsAny(seg, "\\\x00"):
		return fmt.Errorf("invalid resource name %q: segment %q has a forbidden character", s, seg)
	}
	return nil
}

// parseBlob parses "blobs/..." or "compressed-blobs/{compressor}/..." and
// returns the segments after the size.
func (n *Name) parseBlob(s string, segs []string) ([]string, error) {
	if len(segs) == 0 {
		return nil, fmt.Errorf("invalid resource name %q: missing blobs segment", s)
	}
	switch segs[0] {
	case "blobs":
		n.Compressor = repb.Compressor_IDENTITY
		segs = segs[1:]
	case "compressed-blobs":
		if len(segs) < 2 {
			return nil, fmt.Errorf("invalid resource name %q: missing compressor", s)
		}
		c, ok := Compressors[segs[1]]
		if !ok {
			return nil, fmt.Errorf("invalid resource name %q: unsupported compressor %q (supported: zstd)", s, segs[1])
		}
		n.Compressor = c
		segs = segs[2:]
	default:
		return nil, fmt.Errorf("invalid resource name %q: unexpected %q, want blobs or compressed-blobs", s, segs[0])
	}
	if len(segs) > 0 && len(segs[0]) != digest.HashLen {
		if fn, ok := repb.DigestFunction_Value_value[strings.ToUpper(segs[0])]; ok {
			if repb.DigestFunction_Value(fn) != repb.DigestFunction_SHA256 {
				return nil, fmt.Errorf("invalid resource name %q: unsupported digest function %q (supported: sha256)", s, segs[0])
			}
			segs = segs[1:]
		}
	}
	if len(segs) < 2 {
		return nil, fmt.Errorf("invalid resource name %q: want .../HASH/SIZE", s)
	}
	size, err := strconv.ParseInt(segs[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("invalid resource name %q: size %q is not an integer", s, segs[1])
	}
	d, err := digest.New(segs[0], size)
	if err != nil {
		return nil, fmt.Errorf("invalid resource name %q: %v", s, err)
	}
	n.Digest = d
	return segs[2:], nil
}
