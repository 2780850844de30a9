package units

import "testing"

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 450560: "440.0 KiB", 12637976576: "11.8 GiB", 3 << 40: "3.0 TiB", 5 << 50: "5120.0 TiB"} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Plural(1, "CPU", "CPUs") + ", " + Plural(2, "CPU", "CPUs"); got != "1 CPU, 2 CPUs" {
		t.Errorf("Plural: %q", got)
	}
}
