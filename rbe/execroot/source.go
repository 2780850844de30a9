package execroot

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CASSource is the Source that reads blobs from a REAPI CAS: small ones in
// batches, large ones streamed, four at a time. The client verifies each.
func CASSource(cas *client.CAS) Source { return casSource{cas} }

type casSource struct{ cas *client.CAS }

func (s casSource) Fetch(ctx context.Context, ds []digest.Digest, put func(digest.Digest, io.Reader) error) error {
	var small, large []digest.Digest
	for _, d := range ds {
		if d.Size() > client.BatchLimit {
			large = append(large, d)
		} else {
			small = append(small, d)
		}
	}
	if len(small) > 0 {
		blobs, err := s.cas.ReadBatch(ctx, small)
		if err != nil {
			return err
		}
		for _, d := range small {
			b, ok := blobs[d]
			if !ok {
				return status.Errorf(codes.NotFound, "blob %s not found", d)
			}
			if err := put(d, bytes.NewReader(b)); err != nil {
				return err
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, d := range large {
		g.Go(func() error {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(s.cas.Read(gctx, d, pw)) }()
			err := put(d, pr)
			pr.CloseWithError(err)
			return err
		})
	}
	return g.Wait()
}

// FileSource is the Source that reads blobs from the files of an input
// root built on this machine (their Source or Data), the first file of
// each digest. A file whose content no longer has the digest it was hashed
// to fails the read.
func FileSource(files []merkle.File) Source {
	s := fileSource{}
	for _, f := range files {
		if _, ok := s[f.Digest]; !ok {
			s[f.Digest] = f
		}
	}
	return s
}

type fileSource map[digest.Digest]merkle.File

func (s fileSource) Fetch(_ context.Context, ds []digest.Digest, put func(digest.Digest, io.Reader) error) error {
	for _, d := range ds {
		f, ok := s[d]
		if !ok {
			return status.Errorf(codes.NotFound, "blob %s is none of the input files", d)
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		err = put(d, &checkedReader{r: rc, v: digest.NewVerifier(d), path: f.Path})
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// checkedReader hashes what passes through it and fails instead of ending
// when the content does not have its digest.
type checkedReader struct {
	r    io.Reader
	v    *digest.Verifier
	path string
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if _, werr := c.v.Write(p[:n]); werr != nil {
		return n, c.changed(werr)
	}
	if err == io.EOF {
		if cerr := c.v.Check(); cerr != nil {
			return n, c.changed(cerr)
		}
	}
	return n, err
}

func (c *checkedReader) changed(err error) error {
	return fmt.Errorf("input %q: its content changed since it was hashed: %v", c.path, err)
}
