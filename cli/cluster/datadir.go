package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rbs-build/rbs/rbe/auth"
)

// lockDataDir takes an exclusive flock on dir/lock for the life of the
// returned file, so that two servers never share one data directory: they
// would hand out the same job ids and lose jobs. The kernel drops the lock
// when the process exits, crashed or not. The file holds the holder's pid,
// which a refused server names.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = fmt.Sprintf("process %d", pid)
				}
			}
			return nil, fmt.Errorf("data directory %s is in use by %s (another rbs remote serve): stop it or give another --data-dir", dir, holder)
		}
		return nil, fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// workerToken returns the worker token kept in dir/worker-token, making one
// on first use. A server with a user token but no --worker-token-file uses
// it, so that a user's token can never register a worker.
func workerToken(dir string, log *slog.Logger) (string, error) {
	path := filepath.Join(dir, "worker-token")
	if tok, err := auth.ReadTokenFile(path); err == nil {
		logWorkerToken(log, path)
		return tok, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("writing the worker token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("writing the worker token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing the worker token: %w", err)
	}
	logWorkerToken(log, path)
	return tok, nil
}

func logWorkerToken(log *slog.Logger, path string) {
	if log != nil {
		log.Info("workers authenticate with the worker token: copy it to each worker and pass --worker-token-file", "file", path)
	}
}
