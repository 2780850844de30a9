package dashboard

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fakeJobs holds one job, 7, whose output root is root.
type fakeJobs struct {
	root   string
	output []byte
}

func (f *fakeJobs) ListJobs(*jobspb.ListRequest) ([]*jobspb.JobInfo, error) { return nil, nil }

func (f *fakeJobs) ShowJob(id string) ([]*jobspb.JobInfo, error) {
	if id != "7" {
		return nil, status.Errorf(codes.NotFound, "job %s not found", id)
	}
	return []*jobspb.JobInfo{{Id: "7", Record: &jobspb.JobRecord{Id: 7, Index: -1, OutputRoot: f.root, Spec: &jobspb.JobSpec{MemoryBytes: 12637976576}}}}, nil
}

func (f *fakeJobs) CancelJobs(context.Context, []string) ([]*jobspb.JobInfo, map[string]bool, error) {
	return nil, nil, nil
}

func (f *fakeJobs) Output(_ context.Context, req *jobspb.LogsRequest, send func([]byte) error) error {
	if req.OneRank && req.Rank > 0 {
		return status.Errorf(codes.InvalidArgument, "no rank %d", req.Rank)
	}
	return send(f.output)
}

func (f *fakeJobs) QueueList() []*jobspb.QueueInfo         { return nil }
func (f *fakeJobs) ReservationList() []*jobspb.Reservation { return nil }

// put stores b in cas and returns its digest.
func put(t *testing.T, cas blobstore.Store, b []byte) digest.Digest {
	t.Helper()
	d := digest.FromBytes(b)
	if err := cas.Put(context.Background(), d, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAPI(t *testing.T) {
	cas := blobstore.NewMemory()
	file := put(t, cas, []byte(`{"loss": 0.1}`))
	sub, _ := proto.Marshal(&repb.Directory{Files: []*repb.FileNode{{Name: "metrics.json", Digest: file.Proto()}}})
	subD := put(t, cas, sub)
	root, _ := proto.Marshal(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "out", Digest: subD.Proto()}}})
	rootD := put(t, cas, root)
	d := New(Config{Jobs: &fakeJobs{root: rootD.String(), output: []byte("hello\n")}, CAS: cas,
		Status: func() *workerpb.StatusResponse { return &workerpb.StatusResponse{} }})
	mux := http.NewServeMux()
	for p, h := range d.Routes() {
		mux.Handle(p, h)
	}
	mux.Handle("/", d.Page())
	cases := []struct {
		method, path string
		code         int
		body         string // a part of it
	}{
		{"GET", "/api/jobs/7/outputs/out/metrics.json", 200, `{"loss": 0.1}`},
		{"GET", "/api/jobs/7/outputs/out", 404, "no output file out"},
		{"GET", "/api/jobs/7/outputs/out%2F..%2F..%2Fetc%2Fpasswd", 400, "output path"},
		{"GET", "/api/jobs/8/outputs/x", 404, "job 8 not found"},
		{"GET", "/api/jobs/7/logs", 200, "hello"},
		{"GET", "/api/jobs/7/logs?rank=x", 400, `rank "x"`},
		{"GET", "/api/jobs/7/logs?rank=3", 400, "no rank 3"},
		// The CLI's --json schema: numbers as numbers, an object for a job.
		{"GET", "/api/jobs/7", 200, `"memory_bytes": 12637976576,`},
		{"GET", "/api/jobs/7", 200, `"array_index": null,`},
		{"GET", "/api/", 200, `"path": "/api/jobs/{id}/logs"`},
		{"GET", "/api/nothing", 404, "no endpoint GET /api/nothing: GET /api/ lists them"},
		{"GET", "/api/jobs", 200, "[]"},
		{"GET", "/api/jobs/9", 404, "job 9 not found"},
		{"GET", "/api/overview", 200, `"status"`},
		{"GET", "/", 200, "<title>rbs</title>"},
		{"GET", "/app.js", 200, "function route()"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(c.method, c.path, nil)
			mux.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != c.code || !bytes.Contains(body, []byte(c.body)) {
				t.Fatalf("%d %q; want %d with %q", rec.Code, body, c.code, c.body)
			}
		})
	}
}
