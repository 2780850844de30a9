// Command sim drives the batch scheduler's real core (jobs/sched) through a
// simulated fleet: thousands of workers of mixed shapes, a million jobs of
// mixed kinds, and an injected clock, with no process, socket or sleep.
// Each round applies what happened since the last (submissions, starts,
// ends), schedules, and commits the round's batch to the store as the
// server does: SQLite (--store sqlite), or an in-memory fake that only
// takes the batch (--store memory), to tell the core's cost from the
// commit's.
//
//	go run ./bench/sim [--workers N] [--jobs N] [--mix simple|full] [--store memory|sqlite] [--seed N] [--json] [--progress]
//
// It prints placements per second of scheduler time, round times, heap per
// pending job, the longest wait of gangs against singles, a fairness check
// (every job placed within 3x its ideal wait), and utilisation over time;
// and it checks the invariants: every job ends, no worker is
// over-committed, no GPU is given twice, a gang's ranks all start or none.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	cfg := defaults()
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "simulated workers")
	flag.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "jobs to run, counting array tasks")
	flag.StringVar(&cfg.Mix, "mix", cfg.Mix, "workload: simple (single-node CPU jobs) or full")
	flag.StringVar(&cfg.Store, "store", cfg.Store, "where rounds are committed: memory or sqlite")
	flag.Int64Var(&cfg.Seed, "seed", cfg.Seed, "random seed of the workload")
	asJSON := flag.Bool("json", false, "print the figures as one JSON object")
	progress := flag.Bool("progress", false, "print progress to stderr every 10 simulated minutes")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to `FILE`")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
		// A run stopped early still leaves its profile.
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-stop
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(1)
		}()
	}
	if *progress {
		cfg.Progress = os.Stderr
	}
	res, err := Run(cfg)
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "sim:", err)
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
		return
	}
	res.print(os.Stdout)
}
