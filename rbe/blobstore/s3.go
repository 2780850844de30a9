package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/rbs-build/rbs/rbe/digest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// S3Config says where an S3 backend keeps its blobs.
type S3Config struct {
	Bucket   string
	Endpoint string // URL, e.g. http://127.0.0.1:7480 or https://s3.amazonaws.com
	Region   string
	Prefix   string // key prefix inside the bucket, e.g. "cas/" or "ac/"
	// Credentials: from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)
	// or a shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile AWS_PROFILE or default),
	// never argv; fields here override for tests.
	AccessKey, SecretKey string
}

// S3 is a Store of one object per blob in a bucket of an S3-compatible
// object store, named PREFIX + "HASH-SIZE" by the key's hash and size.
// Buckets are addressed by path (http://host/bucket/key), which every
// S3-compatible server accepts.
//
// A blob becomes visible only once it is complete. An S3 PUT is atomic, and
// a Put whose reader fails, or whose content turns out shorter or longer
// than the length the upload was announced with (InvalidArgument), never
// sends the upload's last byte; an upload in parts is never completed and
// is aborted. FindMissing asks for each blob (HEAD), up to s3Lookups at a
// time. Errors carry gRPC codes and name the bucket and the object's key:
// NotFound for an absent blob, PermissionDenied for refused credentials,
// Unavailable for a server that cannot be reached or is overloaded.
type S3 struct {
	client   *minio.Core
	bucket   string
	prefix   string
	endpoint string
}

var _ Store = (*S3)(nil)

const (
	// s3Lookups bounds the HEAD requests one FindMissing has in flight.
	s3Lookups = 32
	// s3Small is the size up to which Put reads a blob into memory before
	// sending it, in one request that can be retried. A larger blob is
	// streamed with its key's size as its length (content-addressed:
	// the size is the content's), except under a key of at most s3Small
	// bytes (an action cache entry under its action's digest), where it
	// goes up in parts of s3PartSize.
	s3Small    = 1 << 20
	s3PartSize = 16 << 20
)

// NewS3 connects to the bucket cfg names and checks that it exists and
// that the credentials are accepted.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("S3 store at %s: no bucket given", cfg.Endpoint)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("S3 bucket %s: endpoint %q is not a URL of the form http://HOST[:PORT] or https://HOST[:PORT]", cfg.Bucket, cfg.Endpoint)
	}
	var creds *credentials.Credentials
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}})
	}
	if v, err := creds.GetWithContext(nil); err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return nil, status.Errorf(codes.Unauthenticated, "S3 bucket %s at %s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or put them in AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials (profile AWS_PROFILE or default)", cfg.Bucket, cfg.Endpoint)
	}
	client, err := minio.NewCore(u.Host, &minio.Options{
		Creds:        creds,
		Secure:       u.Scheme == "https",
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 bucket %s at %s: %v", cfg.Bucket, cfg.Endpoint, err)
	}
	s := &S3{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix, endpoint: cfg.Endpoint}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		code := s3Code(err)
		hint := ""
		if code == codes.PermissionDenied {
			hint = ": check the access key and secret key"
		}
		return nil, status.Errorf(code, "S3 bucket %s at %s: %v%s", cfg.Bucket, cfg.Endpoint, s3Message(err), hint)
	}
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "S3 bucket %s at %s does not exist: create it first", cfg.Bucket, cfg.Endpoint)
	}
	return s, nil
}

func (s *S3) key(d digest.Digest) string { return s.prefix + blobName(d) }

// Get implements Store. A non-zero offset reads a range of the object.
func (s *S3) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	if offset < 0 {
		return s.getAtEnd(ctx, d, offset)
	}
	var opts minio.GetObjectOptions
	if offset > 0 {
		if err := opts.SetRange(offset, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "reading blob %s at offset %d: %v", d, offset, err)
		}
	}
	body, _, _, err := s.client.GetObject(ctx, s.bucket, s.key(d), opts)
	if err != nil {
		if s3Code(err) == codes.OutOfRange {
			return s.getAtEnd(ctx, d, offset)
		}
		return nil, s.error("reading", d, err)
	}
	return &s3Body{ReadCloser: body, s: s, d: d}, nil
}

// getAtEnd is Get for an offset S3 refused: the blob is absent, or the
// offset is its end (an empty read, as other stores allow) or outside it.
func (s *S3) getAtEnd(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	info, err := s.client.StatObject(ctx, s.bucket, s.key(d), minio.StatObjectOptions{})
	if err != nil {
		return nil, s.error("reading", d, err)
	}
	if offset == info.Size {
		return io.NopCloser(strings.NewReader("")), nil
	}
	return nil, badOffset(d, offset, info.Size)
}

// s3Body is an object being read, its errors turned into status errors.
type s3Body struct {
	io.ReadCloser
	s *S3
	d digest.Digest
}

func (b *s3Body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.s.error("reading", b.d, err)
	}
	return n, err
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	var head bytes.Buffer
	if _, err := io.CopyN(&head, r, s3Small+1); err == io.EOF {
		// Small enough to send from memory, in one request that can be
		// retried, signed with the content's hash. (minio-go's default
		// over http, a chunked signature, is refused by radosgw for an
		// empty object.)
		sum := sha256.Sum256(head.Bytes())
		_, err := s.client.PutObject(ctx, s.bucket, s.key(d), bytes.NewReader(head.Bytes()), int64(head.Len()), "", hex.EncodeToString(sum[:]),
			minio.PutObjectOptions{DisableContentSha256: true})
		if err != nil {
			return s.error("storing", d, err)
		}
		return nil
	} else if err != nil {
		return err
	}
	sr := &sizedReader{r: io.MultiReader(&head, r), left: -1, d: d}
	size := int64(-1)
	if d.Size() > s3Small {
		size, sr.left = d.Size(), d.Size()
	}
	_, err := s.client.Client.PutObject(ctx, s.bucket, s.key(d), sr, size, minio.PutObjectOptions{PartSize: s3PartSize})
	if sr.err != nil {
		return sr.err
	}
	if err != nil {
		return s.error("storing", d, err)
	}
	return nil
}

// sizedReader passes r on to an upload. With left ≥ 0 it passes on exactly
// left bytes and then EOF, and a read that r fails, or that shows r to be
// shorter or longer than that, passes on none of its bytes but the error:
// the upload, sent with that length, never receives its last byte and so
// never completes. With left < 0 it passes r on until EOF. Either way, err
// keeps r's error.
type sizedReader struct {
	r    io.Reader
	left int64
	d    digest.Digest
	err  error
}

func (sr *sizedReader) Read(p []byte) (int, error) {
	if sr.err != nil {
		return 0, sr.err
	}
	if sr.left < 0 {
		n, err := sr.r.Read(p)
		if err != nil && err != io.EOF {
			sr.err = err
		}
		return n, err
	}
	if sr.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > sr.left {
		p = p[:sr.left]
	}
	n, err := sr.r.Read(p)
	sr.left -= int64(n)
	switch {
	case err != nil && err != io.EOF:
		sr.err = err
	case sr.left == 0:
		// The last bytes go on only once r is known to end with them.
		sr.err = sr.atEnd()
	case err == io.EOF:
		sr.err = status.Errorf(codes.InvalidArgument, "blob %s: the content is shorter than the %d bytes its digest says", sr.d, sr.d.Size())
	}
	if sr.err != nil {
		return 0, sr.err
	}
	return n, nil
}

// atEnd checks that r has nothing more to read.
func (sr *sizedReader) atEnd() error {
	var b [1]byte
	for range 100 {
		n, err := sr.r.Read(b[:])
		if n > 0 {
			return status.Errorf(codes.InvalidArgument, "blob %s: the content is longer than the %d bytes its digest says", sr.d, sr.d.Size())
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// FindMissing implements Store. It asks for every blob, up to s3Lookups at
// a time; any failure but an absent blob fails the whole call.
func (s *S3) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	first := make(map[digest.Digest]int, len(ds)) // index of each digest's first occurrence
	missing := make([]bool, len(ds))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s3Lookups)
	for i, d := range ds {
		if _, ok := first[d]; ok {
			continue
		}
		first[d] = i
		g.Go(func() error {
			_, err := s.client.StatObject(gctx, s.bucket, s.key(d), minio.StatObjectOptions{})
			switch {
			case err == nil:
			case s3Code(err) == codes.NotFound:
				missing[i] = true
			default:
				return s.error("looking up", d, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []digest.Digest
	for _, d := range ds {
		if missing[first[d]] {
			out = append(out, d)
		}
	}
	return out, nil
}

// error turns an error of an S3 request about blob d into a status error
// naming the blob, the bucket and the object's key.
func (s *S3) error(op string, d digest.Digest, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(s3Code(err), "%s blob %s (object %s in S3 bucket %s at %s): %s", op, d, s.key(d), s.bucket, s.endpoint, s3Message(err))
}

// s3Code is the gRPC code for an error of minio-go.
func s3Code(err error) codes.Code {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Code()
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "NoSuchKey":
			return codes.NotFound
		case "NoSuchBucket":
			return codes.FailedPrecondition
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "AccountProblem",
			"ExpiredToken", "InvalidToken", "RequestTimeTooSkewed":
			return codes.PermissionDenied
		case "InvalidRange":
			return codes.OutOfRange
		case "QuotaExceeded", "EntityTooLarge":
			return codes.ResourceExhausted
		case "SlowDown", "ServiceUnavailable", "RequestTimeout", "InternalError", "Throttling", "RequestThrottled":
			return codes.Unavailable
		}
		switch s := resp.StatusCode; {
		case s == 401 || s == 403:
			return codes.PermissionDenied
		case s == 404:
			return codes.NotFound
		case s == 416:
			return codes.OutOfRange
		case s == 408 || s == 429 || s >= 500:
			return codes.Unavailable
		}
		return codes.Internal
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return codes.Unavailable
	}
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &oe) || errors.As(err, &de) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return codes.Unavailable
	}
	return codes.Internal
}

// s3Message describes an error of minio-go: an S3 error's message, code
// and HTTP status, or the error.
func s3Message(err error) string {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		msg := strings.TrimSuffix(resp.Message, ".")
		if msg == "" || msg == resp.Code {
			return fmt.Sprintf("%s (HTTP %d)", resp.Code, resp.StatusCode)
		}
		return fmt.Sprintf("%s (%s, HTTP %d)", msg, resp.Code, resp.StatusCode)
	}
	return err.Error()
}
