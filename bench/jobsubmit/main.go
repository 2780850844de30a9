// Command jobsubmit submits N single jobs (each `true`, no array) to an rbs
// server from one process over one connection, one Submit call after the
// other, then waits until all have ended and prints the seconds taken. It
// is the in-process counterpart of a shell loop of `rbs job submit` calls,
// and is what bench/jobs-vs-slurm.sh runs for its (a') line.
//
//	RBS_REMOTE=HOST:PORT go run ./bench/jobsubmit [-n 1000]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
)

func main() {
	n := flag.Int("n", 1000, "number of jobs")
	flag.Parse()
	conn, err := client.Dial(client.Options{Target: os.Getenv("RBS_REMOTE"), Token: os.Getenv("RBS_REMOTE_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	jobs := jobspb.NewJobsClient(conn)
	ctx := context.Background()
	start := time.Now()
	job, err := json.Marshal(&manifest.Manifest{Version: manifest.Version, Name: "true", Command: []string{"true"}, CPUs: 1, Nodes: 1})
	if err != nil {
		log.Fatal(err)
	}
	ids := make([]string, 0, *n)
	for range *n {
		r, err := jobs.Submit(ctx, &jobspb.SubmitRequest{Manifests: [][]byte{job}})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, strconv.FormatInt(r.JobId, 10))
	}
	w, err := jobs.Wait(ctx, &jobspb.WaitRequest{Ids: ids})
	if err != nil {
		log.Fatal(err)
	}
	for {
		page, err := w.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range page.Jobs {
			if j.Record.State != "COMPLETED" {
				log.Fatalf("job %s ended %s", j.Id, j.Record.State)
			}
		}
	}
	fmt.Printf("%.3f\n", time.Since(start).Seconds())
}
