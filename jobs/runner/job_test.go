package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/process"
)

// TestJobEnvGPUs checks that a job sees the GPUs pinned to it and no
// others, whatever its own environment says.
func TestJobEnvGPUs(t *testing.T) {
	withUUIDs := []*workerpb.Gpu{{Index: 0, Uuid: "GPU-a"}, {Index: 1, Uuid: "GPU-b"}, {Index: 2, Uuid: "GPU-c"}}
	byIndex := []*workerpb.Gpu{{Index: 0}, {Index: 1}}
	for _, tc := range []struct {
		name         string
		pinned       []int32
		offered      []*workerpb.Gpu
		env          map[string]string
		cuda, nvidia string
	}{
		{"none", nil, withUUIDs, nil, "", "void"},
		{"none, the job asks for all", nil, withUUIDs, map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,2", "NVIDIA_VISIBLE_DEVICES": "all"}, "", "void"},
		{"none on a worker without GPUs", nil, nil, nil, "", "void"},
		{"one", []int32{1}, withUUIDs, nil, "1", "GPU-b"},
		{"two, the job asks for another", []int32{2, 0}, withUUIDs, map[string]string{"CUDA_VISIBLE_DEVICES": "1"}, "2,0", "GPU-c,GPU-a"},
		{"known by index only", []int32{1}, byIndex, nil, "1", "1"},
	} {
		env := jobEnv("/job", nil, tc.env, pinnedGPUs(tc.pinned, tc.offered))
		for _, want := range []string{"CUDA_VISIBLE_DEVICES=" + tc.cuda, "NVIDIA_VISIBLE_DEVICES=" + tc.nvidia, "TMPDIR=/job"} {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %q lacks %s", tc.name, env, want)
			}
		}
	}
}

// TestJobEnvUser checks that a job run as another user gets that user's
// HOME, USER and LOGNAME, and one run as the worker's the worker's.
func TestJobEnvUser(t *testing.T) {
	t.Setenv("HOME", "/home/worker")
	t.Setenv("USER", "worker")
	t.Setenv("LOGNAME", "worker")
	for _, tc := range []struct {
		name string
		user *process.User
		want []string
	}{
		{"the worker's own", nil, []string{"HOME=/home/worker", "USER=worker", "LOGNAME=worker"}},
		{"another", &process.User{Name: "alice", UID: 1001, GID: 1001, Home: "/home/alice"}, []string{"HOME=/home/alice", "USER=alice", "LOGNAME=alice"}},
	} {
		env := jobEnv("/job", tc.user, nil, pinnedGPUs(nil, nil))
		for _, want := range tc.want {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %q lacks %s", tc.name, env, want)
			}
		}
	}
}

// TestJobOutput writes a numbered stream of bytes to a jobOutput in
// pieces and reads what would be sent from several offsets, before and
// after the attempt ends.
func TestJobOutput(t *testing.T) {
	stream := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			b.WriteByte(byte('a' + i%26))
		}
		return b.String()
	}
	// sent reads from off on in 4-byte pieces, as the worker sends, and
	// writes a skip of n bytes as <n>.
	sent := func(t *testing.T, o *jobOutput, off int64) string {
		var b strings.Builder
		for {
			data, at, skipped, err := o.read(off, 4)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) == 0 {
				return b.String()
			}
			if at != off+skipped {
				t.Fatalf("read(%d) starts at %d after skipping %d", off, at, skipped)
			}
			if skipped > 0 {
				fmt.Fprintf(&b, "<%d>", skipped)
			}
			b.Write(data)
			off = at + int64(len(data))
		}
	}
	for _, tc := range []struct {
		name           string
		limit          int64
		size, piece    int
		from           int64
		running, ended string
	}{
		{"no cap", 0, 100, 7, 0, stream(0, 100), stream(0, 100)},
		{"under the cap", 10, 8, 3, 0, stream(0, 5), stream(0, 8)},
		{"at the cap", 10, 10, 3, 0, stream(0, 5), stream(0, 10)},
		{"over the cap", 10, 100, 3, 0, stream(0, 5), stream(0, 5) + "<90>" + stream(95, 100)},
		{"over the cap in one piece", 10, 100, 100, 0, stream(0, 5), stream(0, 5) + "<90>" + stream(95, 100)},
		{"an odd cap", 11, 100, 9, 0, stream(0, 5), stream(0, 5) + "<89>" + stream(94, 100)},
		{"sent again from the head", 10, 100, 3, 3, stream(3, 5), stream(3, 5) + "<90>" + stream(95, 100)},
		{"sent again from the end of the head", 10, 100, 3, 5, "", "<90>" + stream(95, 100)},
		{"sent again from the tail", 10, 100, 3, 97, "", stream(97, 100)},
		{"all sent", 10, 100, 3, 100, "", ""},
		{"nothing written", 10, 0, 3, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newJobOutput(filepath.Join(t.TempDir(), "out"), tc.limit)
			all := stream(0, tc.size)
			for i := 0; i < len(all); i += tc.piece {
				if err := o.write([]byte(all[i:min(i+tc.piece, len(all))])); err != nil {
					t.Fatal(err)
				}
			}
			if got := sent(t, o, tc.from); got != tc.running {
				t.Errorf("while running: %q, want %q", got, tc.running)
			}
			if n := o.end(); n != int64(tc.size) {
				t.Errorf("end() = %d, want %d", n, tc.size)
			}
			o.close()
			if got := sent(t, o, tc.from); got != tc.ended {
				t.Errorf("once ended: %q, want %q", got, tc.ended)
			}
			if err := o.write([]byte("late")); err == nil {
				t.Error("a write after close succeeded")
			}
			fi, err := os.Stat(o.path)
			switch {
			case tc.size == 0 && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("nothing was written, but the file is there (%v)", err)
			case tc.size == 0:
			case err != nil:
				t.Fatal(err)
			case tc.limit > 0 && fi.Size() > tc.limit:
				t.Errorf("the file holds %d bytes, over the cap %d", fi.Size(), tc.limit)
			}
		})
	}
}
