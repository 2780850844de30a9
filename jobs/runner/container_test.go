package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/process"
	"golang.org/x/sys/unix"
)

// fakeHost is a machine with the given programs on PATH; info answers
// `PROGRAM info` by program name, "" for a failure.
func fakeHost(programs map[string]string, info map[string]string) containerHost {
	return containerHost{
		lookPath: func(name string) (string, error) {
			if p, ok := programs[name]; ok {
				return p, nil
			}
			return "", errors.New("not found")
		},
		output: func(_ context.Context, prog string, args ...string) (string, error) {
			if len(args) == 0 || args[0] != "info" {
				return "", errors.New("unexpected command")
			}
			if out := info[filepath.Base(prog)]; out != "" {
				return out + "\n", nil
			}
			return "", errors.New("Cannot connect to the Docker daemon")
		},
		nofile: unix.Rlimit{Cur: 1024, Max: 20000},
		nproc:  unix.Rlimit{Cur: 96549, Max: 96549},
		pidMax: 32768,
	}
}

func TestDetectContainers(t *testing.T) {
	podmanLimits := []string{"--ulimit", "nofile=1024:20000", "--ulimit", "nproc=32768:32768", "--pids-limit", "-1"}
	both := map[string]string{"podman": "/usr/bin/podman", "docker": "/usr/bin/docker", "runc": "/usr/sbin/runc"}
	for _, tc := range []struct {
		name     string
		choice   string
		extra    []string
		programs map[string]string
		info     map[string]string
		kind     string
		path     string
		flags    []string
		err      string
	}{
		{"podman with crun: runc instead", "auto", nil, both, map[string]string{"podman": "crun", "docker": "runc"},
			"podman", "/usr/bin/podman", append([]string{"--runtime", "/usr/sbin/runc"}, podmanLimits...), ""},
		{"podman with runc", "auto", nil, both, map[string]string{"podman": "runc"},
			"podman", "/usr/bin/podman", podmanLimits, ""},
		{"podman with crun and no runc", "auto", nil, map[string]string{"podman": "/usr/bin/podman"}, map[string]string{"podman": "crun"},
			"podman", "/usr/bin/podman", podmanLimits, ""},
		{"flags given go last", "auto", []string{"--ulimit", "nofile=64:64"}, both, map[string]string{"podman": "runc"},
			"podman", "/usr/bin/podman", append(slices.Clone(podmanLimits), "--ulimit", "nofile=64:64"), ""},
		{"podman failing: docker", "auto", nil, both, map[string]string{"docker": "runc"},
			"docker", "/usr/bin/docker", nil, ""},
		{"docker only", "auto", nil, map[string]string{"docker": "/usr/bin/docker"}, map[string]string{"docker": "runc"},
			"docker", "/usr/bin/docker", nil, ""},
		{"docker without its daemon", "auto", nil, map[string]string{"docker": "/usr/bin/docker"}, nil,
			"", "", nil, "podman: not on PATH; docker (/usr/bin/docker): Cannot connect to the Docker daemon"},
		{"neither", "auto", nil, nil, nil, "", "", nil, "podman: not on PATH; docker: not on PATH"},
		{"docker named, podman there too", "docker", nil, both, map[string]string{"podman": "runc", "docker": "runc"},
			"docker", "/usr/bin/docker", nil, ""},
		{"podman named, not there", "podman", nil, map[string]string{"docker": "/usr/bin/docker"}, map[string]string{"docker": "runc"},
			"", "", nil, "podman: not on PATH"},
		{"a path", "/opt/podman/bin/podman", nil, both, map[string]string{"podman": "runc"},
			"podman", "/opt/podman/bin/podman", podmanLimits, ""},
		{"a path of neither", "/usr/bin/nerdctl", nil, both, nil, "", "", nil, "neither podman nor docker"},
		{"none", "none", nil, both, map[string]string{"podman": "runc"}, "", "", nil, ""},
		{"a typo", "podmn", nil, both, nil, "", "", nil, `invalid container runtime "podmn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := detectContainers(context.Background(), tc.choice, tc.extra, fakeHost(tc.programs, tc.info))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("detect = %+v, %v; want error %q", rt, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rt.offered() != tc.kind {
				t.Fatalf("offers %q, want %q", rt.offered(), tc.kind)
			}
			if rt == nil {
				return
			}
			if rt.path != tc.path || !slices.Equal(rt.flags, tc.flags) {
				t.Fatalf("runtime %s %q, want %s %q", rt.path, rt.flags, tc.path, tc.flags)
			}
		})
	}
}

func TestRlimitText(t *testing.T) {
	if got := rlimitText(unix.RLIM_INFINITY); got != "-1" {
		t.Errorf("unlimited = %q", got)
	}
	if got := rlimitText(20000); got != "20000" {
		t.Errorf("20000 = %q", got)
	}
}

func TestContainerRunArgs(t *testing.T) {
	podman := &containerRuntime{kind: "podman", path: "/usr/bin/podman", flags: []string{"--runtime", "/usr/sbin/runc"}}
	podmanCDI := &containerRuntime{kind: "podman", path: "/usr/bin/podman", cdi: true}
	docker := &containerRuntime{kind: "docker", path: "/usr/bin/docker"}
	job := containerJob{name: "rbs-job-1-s-7", image: "localhost/img:1", dir: "/w/jobs/7", envFile: "/w/jobs/7.env", args: []string{"sh", "-c", "echo hi"}}
	common := "run --rm --init --name rbs-job-1-s-7 --network host -v /w/jobs/7:/w/jobs/7 -w /w/jobs/7 --env-file /w/jobs/7.env --user 0:0"
	with := func(f func(*containerJob)) containerJob {
		j := job
		f(&j)
		return j
	}
	for _, tc := range []struct {
		name string
		rt   *containerRuntime
		job  containerJob
		want string
	}{
		{"plain", podman, job, "/usr/bin/podman " + common + " --runtime /usr/sbin/runc localhost/img:1 sh -c echo hi"},
		{"interactive, as a user, with a memory limit", podman, with(func(j *containerJob) {
			j.interactive = true
			j.user = process.User{UID: 1001, GID: 1002, Groups: []uint32{1002, 27}}
			j.memoryBytes = 1 << 30
		}), "/usr/bin/podman " + strings.Replace(common, "--user 0:0", "-i --user 1001:1002 --group-add 1002 --group-add 27", 1) + " --memory 1073741824 --memory-swap 1073741824 --runtime /usr/sbin/runc localhost/img:1 sh -c echo hi"},
		{"GPUs, podman without CDI: by the environment only", podman, with(func(j *containerJob) { j.gpus = []string{"GPU-a", "GPU-b"} }),
			"/usr/bin/podman " + common + " --runtime /usr/sbin/runc localhost/img:1 sh -c echo hi"},
		{"GPUs, podman with CDI", podmanCDI, with(func(j *containerJob) { j.gpus = []string{"GPU-a", "GPU-b"} }),
			"/usr/bin/podman " + common + " --device nvidia.com/gpu=GPU-a --device nvidia.com/gpu=GPU-b localhost/img:1 sh -c echo hi"},
		{"GPUs, docker", docker, with(func(j *containerJob) { j.gpus = []string{"0", "1"} }),
			"/usr/bin/docker " + common + ` --gpus "device=0,1" localhost/img:1 sh -c echo hi`},
	} {
		if got := strings.Join(tc.rt.runArgs(tc.job), " "); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if got := strings.Join(podman.removeArgs("c"), " "); got != "/usr/bin/podman rm --force --time 0 c" {
		t.Errorf("podman remove: %s", got)
	}
	if got := strings.Join(docker.removeArgs("c"), " "); got != "/usr/bin/docker rm --force c" {
		t.Errorf("docker remove: %s", got)
	}
}

// A job's environment reaches the container through a file only the
// worker reads, less what a line cannot hold.
func TestContainerEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	left, err := containerEnvFile(path, []string{"A=1", "B=x = y, z", "BASH_FUNC_f%%=() {\n echo\n}", "C="})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"BASH_FUNC_f%%"}) {
		t.Errorf("left out %q", left)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "A=1\nB=x = y, z\nC=\n" {
		t.Errorf("file holds %q", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// A job in a container gets the job's environment and its GPUs, not the
// worker's PATH or HOME: the image has its own.
func TestContainerJobEnv(t *testing.T) {
	env := withJobVars(map[string]string{}, map[string]string{"RBS_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "all"}, pinnedGPUs([]int32{1}, nil))
	want := []string{"CUDA_VISIBLE_DEVICES=1", "NVIDIA_VISIBLE_DEVICES=1", "RBS_JOB_ID=7"}
	if !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
}

func TestOrphaned(t *testing.T) {
	alive := (&Runner{cfg: Config{Session: "abc"}}).payloadName("7_1-2")
	if !strings.HasPrefix(alive, groupPrefix) || orphaned(alive) {
		t.Errorf("%s: this worker's own, yet orphaned", alive)
	}
	// pid_max is at most 4194304, so no process has this pid.
	if !orphaned(groupPrefix + "99999999-abc-7_1-2") {
		t.Error("a payload of a worker that is gone is not orphaned")
	}
	for _, other := range []string{"web-1", groupPrefix + "x-abc-7", groupPrefix + "0-abc-7"} {
		if orphaned(other) {
			t.Errorf("%s is not rbs's but is orphaned", other)
		}
	}
}
