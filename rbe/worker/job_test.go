package worker

import (
	"slices"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
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
		env := jobEnv("/job", tc.env, pinnedGPUs(tc.pinned, tc.offered))
		for _, want := range []string{"CUDA_VISIBLE_DEVICES=" + tc.cuda, "NVIDIA_VISIBLE_DEVICES=" + tc.nvidia, "TMPDIR=/job"} {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %q lacks %s", tc.name, env, want)
			}
		}
	}
}
