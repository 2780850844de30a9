package heapfloor

import "testing"

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{64 * mib, 0, 1600},         // before the first collection: the runtime's minimum (4 MiB × GOGC/100) becomes the floor
		{64 * mib, 2 * mib, 1600},   // likewise below 4 MiB
		{64 * mib, 4 * mib, 1500},   // 4 MiB growing by 15× reaches 64 MiB
		{64 * mib, 8 * mib, 700},    // 8 MiB growing by 7×
		{64 * mib, 32 * mib, 100},   // half the floor: as GOGC=100
		{64 * mib, 1024 * mib, 100}, // far past it
		{64 * mib, 30 * mib, 113},   // just under half
		{1 << 40, 1, 26214400},      // a large floor stays within GOGC's int32
	} {
		if got := percentFor(c.floor, c.live); got != c.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", c.floor, c.live, got, c.want)
		}
	}
}
