// Command jobsubmit submits N single jobs (each `true`, no array) to an rbs
// server from one process over one connection, then waits until all have
// ended and prints the seconds taken. With -c C, C submitters share the N
// submissions, so that the server's rounds commit many at once (group
// commit); with -nowait it stops timing once every submission has been
// acknowledged, which measures the scheduler's state store, not the
// workers. It is the in-process counterpart of a shell loop of
// `rbs job submit` calls, and is what bench/jobs-vs-slurm.sh runs for its
// (a') line and bench/state-postgres.sh for its submission rates.
//
//	RBS_REMOTE=HOST:PORT go run ./bench/jobsubmit [-n 1000] [-c 1] [-nowait]
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
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
)

func main() {
	n := flag.Int("n", 1000, "number of jobs")
	c := flag.Int("c", 1, "concurrent submitters")
	nowait := flag.Bool("nowait", false, "stop once every submission is acknowledged")
	flag.Parse()
	conn, err := client.Dial(client.Options{Target: os.Getenv("RBS_REMOTE"), Token: os.Getenv("RBS_REMOTE_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	jobs := jobspb.NewJobsClient(conn)
	ctx := context.Background()
	job, err := json.Marshal(&manifest.Manifest{Version: manifest.Version, Name: "true", Command: []string{"true"}, CPUs: 1, Nodes: 1})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	ids := make([]string, *n)
	var wg sync.WaitGroup
	for w := range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < *n; i += *c {
				r, err := jobs.Submit(ctx, &jobspb.SubmitRequest{Manifests: [][]byte{job}, IdempotencyKey: uuid.NewString()})
				if err != nil {
					log.Fatal(err)
				}
				ids[i] = strconv.FormatInt(r.JobId, 10)
			}
		}()
	}
	wg.Wait()
	if *nowait {
		fmt.Printf("%.3f\n", time.Since(start).Seconds())
		return
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
