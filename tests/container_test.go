package tests

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// containerImage imports an image of busybox and a marker file,
// /marker, that only the image has, whose USER is nobody, and removes it
// when the test ends. No
// registry is reachable from CI: the image is built here, the libraries of
// a dynamically linked busybox included.
func containerImage(t *testing.T, podman, busybox string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bin", "tmp"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{busybox}
	if out, err := exec.Command("ldd", busybox).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if filepath.IsAbs(f) {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		dest := filepath.Join(root, f)
		if f == busybox {
			dest = filepath.Join(root, "bin", "busybox")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dest, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			os.Symlink("busybox", filepath.Join(root, "bin", a))
		}
	}
	if err := os.WriteFile(filepath.Join(root, "marker"), []byte("inside the image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 6)
	rand.Read(id)
	image := "localhost/rbs-test:" + hex.EncodeToString(id)
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	if out, err := exec.Command("tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	if out, err := exec.Command(podman, "import", "--change", "USER=65534:65534", tarball, image).CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "--force", image).Run() })
	return image
}

// containersOf lists the containers, running or not, of job id's first
// attempt: the worker names them rbs-job-PID-SESSION-ID-1.
func containersOf(t *testing.T, podman, id string) []string {
	t.Helper()
	out, err := exec.Command(podman, "ps", "--all", "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if strings.HasPrefix(n, "rbs-job-") && strings.HasSuffix(n, "-"+id+"-1") {
			names = append(names, n)
		}
	}
	return names
}

// A job with --container runs in that image, with podman, on a worker that
// has it, its directory mounted as the working directory: its inputs are
// there, its outputs come back, its environment and exit code are its own,
// and a cancel or time limit stops the container.
func TestContainerJobs(t *testing.T) {
	podman := requireTool(t, "podman")
	busybox := requireTool(t, "busybox")
	image := containerImage(t, podman, busybox)
	srv := startServer(t)
	startWorker(t, srv, "plain", "--container-runtime", "none", "--cpus", "4", "--job-slots", "4")

	in := t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "data.txt"), []byte("from the submitter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostOnly := filepath.Join(t.TempDir(), "host-only")
	if err := os.WriteFile(hostOnly, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat /marker
if [ -e "$1" ]; then echo "host path seen"; else echo "no host path"; fi
pwd
id -u
cat data.txt
echo "$GREETING"
echo "$PATH"
mkdir out && echo result > out/result.txt`
	id := submit(t, srv, "--container", image, "--inputs", in, "--outputs", "out", "--env", "GREETING=hello there",
		"--", "sh", "-c", script, "sh", hostOnly)

	// Only a worker without a container runtime: the job waits, saying why.
	waitFor(t, srv, id, "pending for want of a runtime", func(j jobView) bool { return j.PendingReason == "NoWorkerFits" })
	if shown, want := rbs(t, srv, "job", "show", id), "1 worker: no container runtime (podman or docker), the job runs in "+image; !strings.Contains(shown, want) {
		t.Fatalf("job show does not say %q:\n%s", want, shown)
	}

	box := startWorker(t, srv, "box", "--cpus", "4", "--job-slots", "4")
	if log := box.log.String(); !strings.Contains(log, "msg=\"container runtime\" runtime=podman") {
		t.Fatalf("the worker did not find podman; log:\n%s", log)
	}
	var st struct {
		Workers []struct {
			Name             string `json:"name"`
			ContainerRuntime string `json:"container_runtime"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	runtimes := map[string]string{}
	for _, w := range st.Workers {
		runtimes[w.Name] = w.ContainerRuntime
	}
	if runtimes["box"] != "podman" || runtimes["plain"] != "" {
		t.Fatalf("remote status gives the runtimes %v", runtimes)
	}
	if text := rbs(t, srv, "remote", "status"); !strings.Contains(text, "CONTAINERS") || !strings.Contains(text, " podman ") {
		t.Fatalf("remote status does not show the container runtime:\n%s", text)
	}

	// A job that ignores SIGTERM is cancelled now and checked last: it
	// stops only once its grace is over, when the worker kills the
	// container.
	stubborn := submit(t, srv, "--container", image, "--", "sh", "-c", `trap "echo TERM ignored" TERM; echo started; while :; do sleep 0.1; done`)
	waitLogs(t, srv, stubborn, "started\n")
	rbs(t, srv, "job", "cancel", stubborn)
	waitLogs(t, srv, stubborn, "TERM ignored\n")

	j := waitFor(t, srv, id, "COMPLETED", inState("COMPLETED"))
	if len(j.Workers) != 1 || j.Workers[0] != "box" {
		t.Fatalf("the job ran on %v, want box", j.Workers)
	}
	lines := strings.Split(rbs(t, srv, "job", "logs", id), "\n")
	if len(lines) != 8 || lines[0] != "inside the image" || lines[1] != "no host path" || lines[4] != "from the submitter" || lines[5] != "hello there" {
		t.Fatalf("the job printed %q", lines)
	}
	// The image's search path, not the submitter's, which --export leaves
	// out for a container job.
	if lines[6] == os.Getenv("PATH") || lines[6] == "" {
		t.Fatalf("the job's PATH is %q, the submitter's", lines[6])
	}
	// As the worker's user, who owns the job's directory, not the image's.
	if lines[3] != strconv.Itoa(os.Getuid()) {
		t.Fatalf("the job ran as uid %s, want the worker's, %d", lines[3], os.Getuid())
	}
	if jobs := filepath.Join(box.WorkDir, "jobs"); filepath.Dir(lines[2]) != jobs {
		t.Fatalf("the job ran in %s, want its directory under %s", lines[2], jobs)
	}
	dest := filepath.Join(t.TempDir(), "got")
	rbs(t, srv, "job", "outputs", id, "--dest", dest)
	if b, err := os.ReadFile(filepath.Join(dest, "out", "result.txt")); err != nil || string(b) != "result\n" {
		t.Fatalf("the output came back as %q, %v", b, err)
	}

	failed := submit(t, srv, "--container", image, "--", "sh", "-c", "exit 3")
	if j := waitFor(t, srv, failed, "FAILED", inState("FAILED")); j.ExitCode != 3 {
		t.Fatalf("a job that exits 3 ended with %d", j.ExitCode)
	}

	timed := submit(t, srv, "--container", image, "--time", "2s", "--", "sleep", "300")
	waitFor(t, srv, timed, "TIMEOUT", inState("TIMEOUT"))
	if c := containersOf(t, podman, timed); len(c) != 0 {
		t.Fatalf("the containers %v of a job out of time are still there", c)
	}

	long := submit(t, srv, "--container", image, "--", "sh", "-c", "echo started; exec sleep 300")
	waitLogs(t, srv, long, "started\n")
	if c := containersOf(t, podman, long); len(c) != 1 {
		t.Fatalf("a running job has the containers %v, want one", c)
	}
	rbs(t, srv, "job", "cancel", long)
	waitFor(t, srv, long, "CANCELLED", inState("CANCELLED"))
	if c := containersOf(t, podman, long); len(c) != 0 {
		t.Fatalf("the containers %v of a cancelled job are still there", c)
	}

	waitFor(t, srv, stubborn, "CANCELLED", inState("CANCELLED"))
	if c := containersOf(t, podman, stubborn); len(c) != 0 {
		t.Fatalf("the containers %v of a cancelled job that ignored SIGTERM are still there", c)
	}
}
