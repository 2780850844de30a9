package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/rbs-build/rbs/starlark/guard"
)

// interruptible runs fn, the part of a command that evaluates Starlark and
// runs actions. SIGINT and SIGTERM meanwhile end fn's context, which stops
// its actions, and cancel whatever Starlark runs (interrupt.Cancel), so
// that a BUILD file's loop that never ends stops too; fn's failure then
// exits with the status a shell gives a process the signal ended, 128 +
// its number.
func interruptible(fn func(ctx context.Context) error) error {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got atomic.Value // the syscall.Signal received
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case s := <-signals:
			got.Store(s)
			guard.Cancel(fmt.Sprintf("interrupted by %s", signalName(s)))
			cancel()
		case <-done:
		}
	}()
	err := fn(ctx)
	if s, ok := got.Load().(syscall.Signal); ok && err != nil {
		var ee exitError
		if !errors.As(err, &ee) {
			return exitError{err, 128 + int(s)}
		}
	}
	return err
}

// signalName names a signal as messages do: SIGINT, SIGTERM.
func signalName(s os.Signal) string {
	if s == os.Interrupt {
		return "SIGINT"
	}
	return "SIGTERM"
}
