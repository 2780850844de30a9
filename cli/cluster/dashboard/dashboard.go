// Package dashboard provides the web dashboard of an rbs server: a page
// (HTML, CSS and script embedded in the binary, no external assets) that
// shows the cluster, its queues, the jobs with their pending reasons,
// placement, priority, attempts, live logs per rank and outputs, and the
// recent build actions, and the JSON API under /api/ that it reads.
//
// Every read comes from what the batch scheduler shows its readers (its
// View) and from the execution scheduler's status, never through the
// scheduler's loop; cancelling a job is the one write.
package dashboard

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

//go:embed assets
var assets embed.FS

// Jobs is the batch scheduler as the dashboard reads it (jobs/service).
type Jobs interface {
	ListJobs(*jobspb.ListRequest) ([]*jobspb.JobInfo, error)
	ShowJob(id string) ([]*jobspb.JobInfo, error)
	CancelJobs(ctx context.Context, ids []string) ([]*jobspb.JobInfo, map[string]bool, error)
	Output(ctx context.Context, req *jobspb.LogsRequest, send func([]byte) error) error
	QueueList() []*jobspb.QueueInfo
	ReservationList() []*jobspb.Reservation
}

// Config is what the dashboard shows.
type Config struct {
	Jobs Jobs
	// Status is the cluster's status: workers, their slots and resources,
	// the action queue, job counts and action statistics.
	Status func() *workerpb.StatusResponse
	// Actions lists recent build actions, the latest first.
	Actions func() []*workerpb.ActionRecord
	// CAS holds the jobs' outputs.
	CAS blobstore.Store
}

// maxDirectory bounds the size of a Directory read while finding an
// output.
const maxDirectory = 16 << 20

// Dashboard serves the page and its API.
type Dashboard struct{ cfg Config }

// New returns the dashboard of cfg.
func New(cfg Config) *Dashboard { return &Dashboard{cfg} }

// Page serves the page's files.
func (d *Dashboard) Page() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}

// endpoint is one call of the web API, as its index lists it.
type endpoint struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	Description string `json:"description"`
	handler     http.HandlerFunc
}

// endpoints are the web API's calls. Each answers JSON of the schema the
// CLI's --json prints (package schema), but for logs and outputs.
func (d *Dashboard) endpoints() []endpoint {
	return []endpoint{
		{"GET", "/api/", "this index of the endpoints", d.index},
		{"GET", "/api/overview", "status, queues and reservations together, as the dashboard's cluster page shows them", d.overview},
		{"GET", "/api/status", "the cluster's workers, action queue, jobs by state and action statistics, as rbs remote status --json", d.status},
		{"GET", "/api/queues", "the queues and their occupancy, as rbs job queues --json", d.queues},
		{"GET", "/api/reservations", "the maintenance windows, as rbs job reserve --json", d.reservations},
		{"GET", "/api/jobs", "jobs, as rbs job list --json: pending and running ones; ?history=1 adds ended ones, ?state=S (repeatable), ?queue=Q and ?user=U filter", d.jobs},
		{"GET", "/api/jobs/{id}", "one job or task, as rbs job show --json: an object, or an array of the tasks for an array's id", d.job},
		{"POST", "/api/jobs/{id}/cancel", "cancel a job (an array's id: its tasks not ended); answers the jobs as rbs job list --json", d.cancel},
		{"GET", "/api/jobs/{id}/logs", "the job's output as text, followed until it ends, as rbs job logs -f; ?rank=N for one node of a gang", d.logs},
		{"GET", "/api/jobs/{id}/outputs/{path...}", "one file of the job's recorded outputs", d.output},
		{"GET", "/api/actions", "recent build actions, the latest first, and the statistics of all: {\"actions\": [...], \"stats\": {...}}", d.actions},
	}
}

// Routes are the API's handlers by http.ServeMux pattern.
func (d *Dashboard) Routes() map[string]http.Handler {
	routes := map[string]http.Handler{}
	for _, e := range d.endpoints() {
		pattern := e.Method + " " + e.Path
		if e.Path == "/api/" {
			pattern += "{$}"
		}
		routes[pattern] = e.handler
	}
	routes["/api/"] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("no endpoint %s %s: GET /api/ lists them", r.Method, r.URL.Path), http.StatusNotFound)
	})
	return routes
}

func (d *Dashboard) index(w http.ResponseWriter, _ *http.Request) {
	reply(w, map[string]any{"endpoints": d.endpoints()})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	schema.Write(w, v)
}

// fail answers err with the HTTP status of its gRPC code.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch status.Code(err) {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.Unavailable, codes.ResourceExhausted:
		code = http.StatusServiceUnavailable
	}
	http.Error(w, status.Convert(err).Message(), code)
}

func (d *Dashboard) overview(w http.ResponseWriter, _ *http.Request) {
	reply(w, map[string]any{
		"status":       schema.FromStatus(d.cfg.Status()),
		"queues":       schema.Queues(d.cfg.Jobs.QueueList()),
		"reservations": schema.Reservations(d.cfg.Jobs.ReservationList(), time.Now()),
	})
}

func (d *Dashboard) status(w http.ResponseWriter, _ *http.Request) {
	reply(w, schema.FromStatus(d.cfg.Status()))
}

func (d *Dashboard) queues(w http.ResponseWriter, _ *http.Request) {
	reply(w, schema.Queues(d.cfg.Jobs.QueueList()))
}

func (d *Dashboard) reservations(w http.ResponseWriter, _ *http.Request) {
	reply(w, schema.Reservations(d.cfg.Jobs.ReservationList(), time.Now()))
}

// jobs lists jobs: ?state= (repeated), ?queue=, ?user=, ?history=1.
func (d *Dashboard) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &jobspb.ListRequest{States: q["state"], Queue: q.Get("queue"), History: q.Get("history") == "1"}
	jobs, err := d.cfg.Jobs.ListJobs(req)
	if err != nil {
		fail(w, err)
		return
	}
	if u := q.Get("user"); u != "" {
		mine := jobs[:0]
		for _, j := range jobs {
			if j.Record.Spec.GetUser() == u {
				mine = append(mine, j)
			}
		}
		jobs = mine
	}
	reply(w, schema.Jobs(jobs))
}

func (d *Dashboard) job(w http.ResponseWriter, r *http.Request) {
	jobs, err := d.cfg.Jobs.ShowJob(r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, schema.Shown(r.PathValue("id"), jobs))
}

func (d *Dashboard) cancel(w http.ResponseWriter, r *http.Request) {
	jobs, _, err := d.cfg.Jobs.CancelJobs(r.Context(), []string{r.PathValue("id")})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, schema.Jobs(jobs))
}

// logs streams a job's output as it is written, until the job ends:
// ?rank=N for one rank of a gang, else every rank's lines prefixed.
func (d *Dashboard) logs(w http.ResponseWriter, r *http.Request) {
	req := &jobspb.LogsRequest{Id: r.PathValue("id"), Follow: true}
	if s := r.URL.Query().Get("rank"); s != "" {
		rank, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			http.Error(w, fmt.Sprintf("rank %q: want a number", s), http.StatusBadRequest)
			return
		}
		req.OneRank, req.Rank = true, int32(rank)
	}
	started := false
	flusher, _ := w.(http.Flusher)
	err := d.cfg.Jobs.Output(r.Context(), req, func(b []byte) error {
		if !started {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			started = true
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if err != nil && !started && r.Context().Err() == nil {
		fail(w, err)
	}
}

// output sends one file of a job's recorded outputs.
func (d *Dashboard) output(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	if err := merkle.CheckPath(p); err != nil {
		http.Error(w, fmt.Sprintf("output path %q: %v", p, err), http.StatusBadRequest)
		return
	}
	jobs, err := d.cfg.Jobs.ShowJob(r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	if len(jobs) != 1 || jobs[0].Record.OutputRoot == "" {
		http.Error(w, fmt.Sprintf("job %s has no recorded outputs", r.PathValue("id")), http.StatusNotFound)
		return
	}
	root, err := digest.Parse(jobs[0].Record.OutputRoot)
	if err != nil {
		fail(w, err)
		return
	}
	f, err := d.find(r.Context(), root, p)
	if err != nil {
		fail(w, err)
		return
	}
	rc, err := d.cfg.CAS.Get(r.Context(), f, 0)
	if err != nil {
		fail(w, err)
		return
	}
	defer rc.Close()
	name := p[strings.LastIndex(p, "/")+1:]
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size(), 10))
	io.Copy(w, rc)
}

// find returns the digest of the file at p under the Directory root.
func (d *Dashboard) find(ctx context.Context, root digest.Digest, p string) (digest.Digest, error) {
	dir := root
	parts := strings.Split(p, "/")
	for _, name := range parts[:len(parts)-1] {
		pb, err := d.directory(ctx, dir)
		if err != nil {
			return digest.Digest{}, err
		}
		i := slices.IndexFunc(pb.Directories, func(n *repb.DirectoryNode) bool { return n.Name == name })
		if i < 0 {
			return digest.Digest{}, status.Errorf(codes.NotFound, "no output file %s", p)
		}
		if dir, err = digest.FromProto(pb.Directories[i].Digest); err != nil {
			return digest.Digest{}, err
		}
	}
	pb, err := d.directory(ctx, dir)
	if err != nil {
		return digest.Digest{}, err
	}
	i := slices.IndexFunc(pb.Files, func(n *repb.FileNode) bool { return n.Name == parts[len(parts)-1] })
	if i < 0 {
		return digest.Digest{}, status.Errorf(codes.NotFound, "no output file %s", p)
	}
	return digest.FromProto(pb.Files[i].Digest)
}

// directory reads the Directory dir from the CAS, refusing one over
// maxDirectory bytes.
func (d *Dashboard) directory(ctx context.Context, dir digest.Digest) (*repb.Directory, error) {
	b, err := blobstore.GetBytesMax(ctx, d.cfg.CAS, dir, maxDirectory)
	if err != nil {
		return nil, err
	}
	pb := &repb.Directory{}
	if err := proto.Unmarshal(b, pb); err != nil {
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	return pb, nil
}

func (d *Dashboard) actions(w http.ResponseWriter, _ *http.Request) {
	var recent []*workerpb.ActionRecord
	if d.cfg.Actions != nil {
		recent = d.cfg.Actions()
	}
	reply(w, map[string]any{"actions": schema.Actions(recent), "stats": schema.FromActionStats(d.cfg.Status().GetActions())})
}
