package blobstore

import (
	"context"
	"io"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ContentAddressed wraps a backend as a CAS. Put accepts only bytes that hash
// to their digest and have its size: a mismatch fails the read the backend is
// consuming, so the backend discards the blob before it becomes visible, and
// Put returns codes.InvalidArgument. The empty blob is always present.
func ContentAddressed(s Store) Store { return verifying{s} }

type verifying struct{ Store }

func (v verifying) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	if d == digest.Empty {
		if offset != 0 {
			return nil, badOffset(d, offset, 0)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	return v.Store.Get(ctx, d, offset)
}

func (v verifying) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	if !slices.Contains(ds, digest.Empty) {
		return v.Store.FindMissing(ctx, ds)
	}
	nonEmpty := make([]digest.Digest, 0, len(ds))
	for _, d := range ds {
		if d != digest.Empty {
			nonEmpty = append(nonEmpty, d)
		}
	}
	return v.Store.FindMissing(ctx, nonEmpty)
}

func (v verifying) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	vr := &verifyingReader{r: r, v: digest.NewVerifier(d)}
	err := v.Store.Put(context.WithValue(ctx, checkedPut{}, true), d, vr)
	if vr.err != nil {
		return status.Error(codes.InvalidArgument, vr.err.Error())
	}
	return err
}

// checkedPut marks the context of a Put whose bytes ContentAddressed
// checks: a store below it that has stored them (the check passed, or its
// Put would have failed) may trust that they match their key.
type checkedPut struct{}

// putChecked reports whether ctx is that of a checked Put.
func putChecked(ctx context.Context) bool {
	checked, _ := ctx.Value(checkedPut{}).(bool)
	return checked
}

// verifyingReader hashes what passes through it and turns the final EOF into
// an error when the bytes do not match the digest.
type verifyingReader struct {
	r   io.Reader
	v   *digest.Verifier
	err error
}

func (vr *verifyingReader) Read(p []byte) (int, error) {
	if vr.err != nil {
		return 0, vr.err
	}
	n, err := vr.r.Read(p)
	if n > 0 {
		if _, werr := vr.v.Write(p[:n]); werr != nil {
			vr.err = werr
			return 0, werr
		}
	}
	if err == io.EOF {
		if cerr := vr.v.Check(); cerr != nil {
			vr.err = cerr
			return n, cerr
		}
	}
	return n, err
}
