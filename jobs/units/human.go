package units

import "fmt"

// Human formats n bytes for people, in the largest binary unit it reaches,
// to a tenth: "512 B", "440.0 KiB", "3.8 GiB". Every size rbs prints for
// people (job show, job stats, placement reasons, remote status) is
// formatted by it.
func Human(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1<<10 && n > -1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/(1<<10), 0
	for i < len(units)-1 && (f >= 1<<10 || f <= -1<<10) {
		f /= 1 << 10
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// Plural says n things, in the singular for one: "1 CPU", "4 CPUs".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
