package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/rbs-build/rbs/rbe/blobstore/s3test"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// randomBytes returns n bytes that differ for each seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// failAfter reads b and then fails with err where b would end.
func failAfter(b []byte, err error) io.Reader {
	return io.MultiReader(bytes.NewReader(b), iotestErrReader{err})
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// TestS3 runs everything against one real S3 server (Ceph's radosgw), each
// part under its own key prefix.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	config := func(prefix string) S3Config {
		return S3Config{Bucket: srv.Bucket, Endpoint: srv.Endpoint, Region: srv.Region, Prefix: prefix,
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}
	}
	open := func(t *testing.T, prefix string) *S3 {
		t.Helper()
		s, err := NewS3(ctx, config(prefix))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// raw reaches the bucket past the store, to see what it stored.
	raw, err := minio.NewCore(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
		Region:       srv.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	// nothingUnder checks that no object, and no unfinished upload, has a
	// key starting with prefix.
	nothingUnder := func(t *testing.T, prefix string) {
		t.Helper()
		for obj := range raw.Client.ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			t.Errorf("object %s (%d bytes) is visible", obj.Key, obj.Size)
		}
		ups, err := raw.ListMultipartUploads(ctx, srv.Bucket, prefix, "", "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ups.Uploads {
			t.Errorf("multipart upload of %s left unfinished", u.Key)
		}
	}

	t.Run("contract", func(t *testing.T) { testContract(t, open(t, "contract/")) })
	t.Run("content addressed", func(t *testing.T) { testContentAddressed(t, open(t, "verified/")) })

	t.Run("object names", func(t *testing.T) {
		s := open(t, "names/")
		d, b := blob("named")
		if err := PutBytes(ctx, s, d, b); err != nil {
			t.Fatal(err)
		}
		key := "names/" + d.Hash() + "-5"
		info, err := raw.StatObject(ctx, srv.Bucket, key, minio.StatObjectOptions{})
		if err != nil || info.Size != 5 {
			t.Fatalf("object %s: %+v, %v", key, info, err)
		}
	})

	t.Run("round trips", func(t *testing.T) {
		s := open(t, "sizes/")
		for _, tc := range []struct {
			name string
			key  func(b []byte) digest.Digest
			size int
		}{
			// The empty blob is a blob like any other here, as in Disk and
			// Memory; ContentAddressed makes it always present.
			{"empty", digest.FromBytes, 0},
			{"small", digest.FromBytes, 1000},
			{"just small", digest.FromBytes, s3Small},
			{"streamed", digest.FromBytes, s3Small + 1},
			{"in parts", digest.FromBytes, s3PartSize + 3<<20},
			// An action cache entry: its key is an action's digest, its
			// content larger than the key says.
			{"larger than its key", func([]byte) digest.Digest { return digest.FromBytes([]byte("action")) }, s3Small + 10},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := randomBytes(uint64(tc.size), tc.size)
				d := tc.key(b)
				if missing, err := s.FindMissing(ctx, []digest.Digest{d}); err != nil || len(missing) != 1 {
					t.Fatalf("FindMissing before Put = %v, %v", missing, err)
				}
				if err := s.Put(ctx, d, bytes.NewReader(b)); err != nil {
					t.Fatalf("Put: %v", err)
				}
				got, err := GetBytes(ctx, s, d)
				if err != nil || !bytes.Equal(got, b) {
					t.Fatalf("GetBytes: %d bytes, %v; want %d bytes as stored", len(got), err, len(b))
				}
				for _, off := range []int{1, len(b) / 2, len(b)} {
					if off > len(b) {
						continue
					}
					rc, err := s.Get(ctx, d, int64(off))
					if err != nil {
						t.Fatalf("Get at %d: %v", off, err)
					}
					got, err := io.ReadAll(rc)
					rc.Close()
					if err != nil || !bytes.Equal(got, b[off:]) {
						t.Fatalf("Get at %d: %d bytes, %v; want the last %d", off, len(got), err, len(b)-off)
					}
				}
				if _, err := s.Get(ctx, d, int64(len(b)+1)); status.Code(err) != codes.OutOfRange {
					t.Fatalf("Get past the end: %v, want OutOfRange", err)
				}
			})
		}
	})

	t.Run("absent", func(t *testing.T) {
		s := open(t, "absent/")
		d, _ := blob("never stored")
		for _, off := range []int64{0, 3, -1} {
			_, err := s.Get(ctx, d, off)
			if !IsNotFound(err) {
				t.Fatalf("Get at %d: %v, want NotFound", off, err)
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, srv.Bucket) || !strings.Contains(msg, "absent/"+d.Hash()+"-12") {
				t.Fatalf("Get at %d: %q names neither the bucket nor the key", off, msg)
			}
		}
	})

	t.Run("find missing", func(t *testing.T) {
		s := open(t, "missing/")
		var all, want []digest.Digest
		for i := range 100 {
			d, b := blob(fmt.Sprint("blob ", i))
			all = append(all, d)
			if i%3 == 0 {
				want = append(want, d)
				continue
			}
			if err := PutBytes(ctx, s, d, b); err != nil {
				t.Fatal(err)
			}
		}
		// Asked twice, a missing blob is reported twice, as by the other
		// stores.
		all = append(all, want[0])
		want = append(want, want[0])
		got, err := s.FindMissing(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("FindMissing = %v\nwant %v", got, want)
		}
		if got, err := s.FindMissing(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("FindMissing(nil) = %v, %v", got, err)
		}
	})

	t.Run("failed put leaves nothing", func(t *testing.T) {
		broken := errors.New("the source broke")
		small := randomBytes(1, 1000)
		large := randomBytes(2, s3Small+5000)
		huge := randomBytes(3, s3PartSize+2<<20)
		action := digest.FromBytes([]byte("an action"))
		for _, tc := range []struct {
			name string
			d    digest.Digest
			r    io.Reader
			code codes.Code // of Put's error; OK: it is the reader's own
		}{
			{"small, fails midway", digest.FromBytes(small), failAfter(small[:500], broken), codes.OK},
			{"small, fails at the end", digest.FromBytes(small), failAfter(small, broken), codes.OK},
			{"streamed, fails midway", digest.FromBytes(large), failAfter(large[:s3Small+100], broken), codes.OK},
			{"streamed, fails at the end", digest.FromBytes(large), failAfter(large, broken), codes.OK},
			{"streamed, too short", digest.FromBytes(large), bytes.NewReader(large[:len(large)-1]), codes.InvalidArgument},
			{"streamed, too long", digest.FromBytes(large), bytes.NewReader(append(large[:len(large):len(large)], 'x')), codes.InvalidArgument},
			{"in parts, fails in the second", digest.FromBytes(huge), failAfter(huge[:s3PartSize+1<<20], broken), codes.OK},
			{"in parts, fails at the end", digest.FromBytes(huge), failAfter(huge, broken), codes.OK},
			{"larger than its key, fails midway", action, failAfter(large[:s3Small+100], broken), codes.OK},
		} {
			t.Run(tc.name, func(t *testing.T) {
				prefix := "failed/" + strings.ReplaceAll(tc.name, " ", "-") + "/"
				s := open(t, prefix)
				err := s.Put(ctx, tc.d, tc.r)
				if tc.code == codes.OK && !errors.Is(err, broken) {
					t.Fatalf("Put = %v, want the reader's error", err)
				}
				if tc.code != codes.OK && status.Code(err) != tc.code {
					t.Fatalf("Put = %v, want %v", err, tc.code)
				}
				if missing, err := s.FindMissing(ctx, []digest.Digest{tc.d}); err != nil || len(missing) != 1 {
					t.Fatalf("FindMissing after the failed Put = %v, %v; want it missing", missing, err)
				}
				if _, err := s.Get(ctx, tc.d, 0); !IsNotFound(err) {
					t.Fatalf("Get after the failed Put: %v, want NotFound", err)
				}
				nothingUnder(t, prefix)
			})
		}
	})

	t.Run("wrong credentials", func(t *testing.T) {
		for _, tc := range []struct{ name, access, secret string }{
			{"wrong secret", srv.AccessKey, "not-the-secret"},
			{"unknown access key", "nobody", srv.SecretKey},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := config("")
				cfg.AccessKey, cfg.SecretKey = tc.access, tc.secret
				_, err := NewS3(ctx, cfg)
				if status.Code(err) != codes.PermissionDenied {
					t.Fatalf("NewS3 = %v, want PermissionDenied", err)
				}
				for _, want := range []string{srv.Bucket, srv.Endpoint, "access key"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("NewS3 error %q does not say %q", err, want)
					}
				}
			})
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		cfg := config("")
		cfg.Bucket = "no-such-bucket"
		_, err := NewS3(ctx, cfg)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("NewS3 = %v, want FailedPrecondition", err)
		}
		for _, want := range []string{"no-such-bucket", srv.Endpoint, "does not exist"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("NewS3 error %q does not say %q", err, want)
			}
		}
	})

	t.Run("credentials from the environment", func(t *testing.T) {
		clearAWSEnv(t)
		t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
		cfg := config("env/")
		cfg.AccessKey, cfg.SecretKey = "", ""
		if _, err := NewS3(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("credentials from a file", func(t *testing.T) {
		clearAWSEnv(t)
		file := filepath.Join(t.TempDir(), "credentials")
		ini := fmt.Sprintf("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[rbs]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)
		if err := os.WriteFile(file, []byte(ini), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
		t.Setenv("AWS_PROFILE", "rbs")
		cfg := config("file/")
		cfg.AccessKey, cfg.SecretKey = "", ""
		if _, err := NewS3(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	})

	// A --cas chain with a disk cache in front of the bucket: the CAS and
	// the action cache keep their objects apart, and a second server's
	// empty cache reads what the first wrote through the bucket.
	t.Run("chain", func(t *testing.T) {
		clearAWSEnv(t)
		t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
		spec := func() Spec {
			sp, err := Parse(fmt.Sprintf("cache(disk:%s,s3://%s/team?endpoint=%s&region=%s)", t.TempDir(), srv.Bucket, srv.Endpoint, srv.Region))
			if err != nil {
				t.Fatal(err)
			}
			return sp
		}
		d, b := blob("through the chain")
		for _, kind := range []Kind{CASKind, ACKind} {
			first, err := Open(ctx, spec(), Options{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			if err := PutBytes(ctx, first, d, b); err != nil {
				t.Fatal(err)
			}
			key := "team/" + kind.prefix() + d.Hash() + "-" + fmt.Sprint(d.Size())
			if _, err := raw.StatObject(ctx, srv.Bucket, key, minio.StatObjectOptions{}); err != nil {
				t.Fatalf("%v: no object %s in the bucket: %v", kind, key, err)
			}
			second, err := Open(ctx, spec(), Options{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := GetBytes(ctx, second, d); err != nil || string(got) != string(b) {
				t.Fatalf("%v: another server's chain read %q, %v", kind, got, err)
			}
		}
	})
}

// clearAWSEnv leaves the test no credentials of the environment's or of
// a credentials file.
func clearAWSEnv(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY",
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE"} {
		t.Setenv(k, "")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "none"))
}

// TestNewS3Refuses covers what NewS3 refuses without asking a server.
func TestNewS3Refuses(t *testing.T) {
	clearAWSEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  S3Config
		want string
	}{
		{"no bucket", S3Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b"}, "no bucket"},
		{"endpoint not a URL", S3Config{Bucket: "b", Endpoint: "127.0.0.1:7480", AccessKey: "a", SecretKey: "b"}, `endpoint "127.0.0.1:7480"`},
		{"endpoint with a path", S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:7480/b", AccessKey: "a", SecretKey: "b"}, "http://HOST[:PORT]"},
		{"no credentials", S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:1"}, "AWS_ACCESS_KEY_ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewS3(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewS3 = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestS3Codes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404}, codes.NotFound},
		{minio.ErrorResponse{StatusCode: 404}, codes.NotFound},
		{minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, codes.FailedPrecondition},
		{minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, codes.PermissionDenied},
		{minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, codes.PermissionDenied},
		{minio.ErrorResponse{Code: "InvalidAccessKeyId", StatusCode: 403}, codes.PermissionDenied},
		{minio.ErrorResponse{Code: "InvalidRange", StatusCode: 416}, codes.OutOfRange},
		{minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}, codes.Unavailable},
		{minio.ErrorResponse{Code: "502 Bad Gateway", StatusCode: 502}, codes.Unavailable},
		{minio.ErrorResponse{Code: "QuotaExceeded", StatusCode: 403}, codes.ResourceExhausted},
		{minio.ErrorResponse{Code: "MalformedXML", StatusCode: 400}, codes.Internal},
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), codes.Unavailable},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), codes.Unavailable},
		{timeoutError{}, codes.Unavailable},
		{io.ErrUnexpectedEOF, codes.Unavailable},
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{errors.New("something else"), codes.Internal},
	} {
		if got := s3Code(tc.err); got != tc.want {
			t.Errorf("s3Code(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestS3Unreachable checks that a server that cannot be reached is
// Unavailable, and says where it was looked for.
func TestS3Unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	_, err = NewS3(context.Background(), S3Config{Bucket: "bucket", Endpoint: endpoint, Region: "us-east-1", AccessKey: "a", SecretKey: "b"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), endpoint) {
		t.Fatalf("NewS3 = %v, want Unavailable naming %s", err, endpoint)
	}
}

// TestSizedReader checks what makes a failed streamed Put leave nothing:
// never all of the digest's size is passed on unless the content is
// complete, of exactly that size.
func TestSizedReader(t *testing.T) {
	content := []byte("0123456789")
	d := digest.FromBytes(content)
	broken := errors.New("broken")
	for _, tc := range []struct {
		name string
		r    io.Reader
		code codes.Code // of the error; OK: broken, or none if passed is all of content
		pass int        // bytes passed on
	}{
		{"whole", bytes.NewReader(content), codes.OK, 10},
		{"whole, EOF with the last bytes", iotestDataErrReader(content), codes.OK, 10},
		{"fails midway", failAfter(content[:4], broken), codes.OK, 4},
		{"fails where it should end", failAfter(content, broken), codes.OK, 0},
		{"short", bytes.NewReader(content[:9]), codes.InvalidArgument, 9},
		{"long", bytes.NewReader([]byte("0123456789!")), codes.InvalidArgument, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &sizedReader{r: tc.r, left: d.Size(), d: d}
			got, err := io.ReadAll(sr)
			switch {
			case tc.code != codes.OK && status.Code(err) != tc.code:
				t.Fatalf("error %v, want %v", err, tc.code)
			case tc.code == codes.OK && tc.pass < len(content) && !errors.Is(err, broken):
				t.Fatalf("error %v, want %v", err, broken)
			case tc.code == codes.OK && tc.pass == len(content) && err != nil:
				t.Fatal(err)
			}
			if len(got) != tc.pass {
				t.Fatalf("passed on %q, want %d bytes", got, tc.pass)
			}
			if err != nil && sr.err != err {
				t.Fatalf("kept error %v, returned %v", sr.err, err)
			}
		})
	}
}

// iotestDataErrReader returns all of b with io.EOF in one read.
func iotestDataErrReader(b []byte) io.Reader { return &dataEOF{b} }

type dataEOF struct{ b []byte }

func (r *dataEOF) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		return n, io.EOF
	}
	return n, nil
}
