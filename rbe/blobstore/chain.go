package blobstore

import (
	"context"
	"fmt"
	"os"

	"github.com/rbs-build/rbs/rbe/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Kind is what a spec is opened as: the CAS or the action cache. The same
// spec builds either; only the grpc backend differs, reaching the remote's
// CAS or its ActionCache service.
type Kind int

// The kinds of store Open builds.
const (
	CASKind Kind = iota // a CAS: grpc backends are the remote's CAS
	ACKind              // an action cache: grpc backends are the remote's ActionCache
)

func (k Kind) String() string {
	if k == ACKind {
		return "action cache"
	}
	return "CAS"
}

// defaultS3Endpoint is the S3 of an s3:// spec that names no endpoint:
// Amazon's.
const defaultS3Endpoint = "https://s3.amazonaws.com"

// prefix is where a store of the kind keeps its objects in a bucket.
func (k Kind) prefix() string {
	if k == ACKind {
		return "ac/"
	}
	return "cas/"
}

// DiskOptions are the options of a disk store of the kind: a CAS's reads
// are checked against their keys (WithCheckedReads); an action cache's
// entries are not content.
func (k Kind) DiskOptions() []DiskOption {
	if k == CASKind {
		return []DiskOption{WithCheckedReads()}
	}
	return nil
}

// Options says how Open builds a spec's backends.
type Options struct {
	Kind Kind
	// DiskMaxSize bounds, in bytes, each disk backend whose spec names no
	// max_size; 0 for no bound.
	DiskMaxSize int64
	// Token is the bearer token sent to the grpc backends whose spec
	// names no token_file; "" sends none.
	Token string
}

// Open builds the Store s describes, as o.Kind. Remote backends connect on
// first use, so a remote that is down when Open is called does not fail it
// (a mirror goes on from its other side); their connections are closed when
// ctx is done.
func Open(ctx context.Context, s Spec, o Options) (Store, error) {
	var conns []*grpc.ClientConn
	st, err := open(ctx, s, o, &conns)
	for _, c := range conns {
		if err != nil {
			c.Close()
		} else {
			context.AfterFunc(ctx, func() { c.Close() })
		}
	}
	return st, err
}

func open(ctx context.Context, s Spec, o Options, conns *[]*grpc.ClientConn) (Store, error) {
	switch s := s.(type) {
	case *DiskSpec:
		bound := s.MaxSize
		if bound == UnsetSize {
			bound = o.DiskMaxSize
		}
		if err := checkStoreDir(s.Dir); err != nil {
			return nil, err
		}
		return NewDisk(s.Dir, bound, o.Kind.DiskOptions()...)
	case *GRPCSpec:
		conn, err := client.Dial(client.Options{Target: s.target(), Token: o.Token, TokenFile: s.TokenFile, CACert: s.CACert})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		*conns = append(*conns, conn)
		if o.Kind == ACKind {
			return NewRemoteActionCache(conn, s.Instance), nil
		}
		return NewRemote(conn, s.Instance), nil
	case *S3Spec:
		// The CAS and the action cache may share a bucket: each keeps its
		// objects under a prefix of its own.
		prefix := o.Kind.prefix()
		if s.Prefix != "" {
			prefix = s.Prefix + "/" + prefix
		}
		endpoint := s.Endpoint
		if endpoint == "" {
			endpoint = defaultS3Endpoint
		}
		st, err := NewS3(ctx, S3Config{Bucket: s.Bucket, Endpoint: endpoint, Region: s.Region, Prefix: prefix})
		if err != nil {
			return nil, fmt.Errorf("%s: %s", s, status.Convert(err).Message())
		}
		return st, nil
	case *ShardSpec:
		backends := make([]ShardBackend, len(s.Backends))
		for i, b := range s.Backends {
			st, err := open(ctx, b.Spec, o, conns)
			if err != nil {
				return nil, err
			}
			backends[i] = ShardBackend{Name: b.Spec.shardName(), Weight: b.Weight, Store: st}
		}
		return NewShard(backends)
	case *MirrorSpec:
		a, err := open(ctx, s.A, o, conns)
		if err != nil {
			return nil, err
		}
		b, err := open(ctx, s.B, o, conns)
		if err != nil {
			return nil, err
		}
		return NewMirror(a, b), nil
	case *CacheSpec:
		local, err := open(ctx, s.Disk, o, conns)
		if err != nil {
			return nil, err
		}
		remote, err := open(ctx, s.Remote, o, conns)
		if err != nil {
			return nil, err
		}
		return NewCache(local, remote), nil
	}
	return nil, fmt.Errorf("unknown store spec %T", s)
}

// checkStoreDir refuses a directory holding anything but a Disk's files
// (two-letter shard directories, tmp), since opening a Disk there would
// clear its tmp and later evict into it.
func checkStoreDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("disk store %s: %w", dir, err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "tmp" && n != "lost+found" && !(e.IsDir() && len(n) == 2 && isHex(n)) {
			return fmt.Errorf("disk store %s: the directory holds %s, which is not a blob store's: give the store a directory of its own", dir, n)
		}
	}
	return nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
