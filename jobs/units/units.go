// Package units parses the quantities users type: sizes such as "50GiB" or
// "512M". Every parser rejects bad input with an error naming the value.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes that flags accept in human form.
type Size int64

var sizeUnits = map[string]float64{
	"": 1, "B": 1,
	"K": 1 << 10, "KI": 1 << 10, "KIB": 1 << 10, "KB": 1e3,
	"M": 1 << 20, "MI": 1 << 20, "MIB": 1 << 20, "MB": 1e6,
	"G": 1 << 30, "GI": 1 << 30, "GIB": 1 << 30, "GB": 1e9,
	"T": 1 << 40, "TI": 1 << 40, "TIB": 1 << 40, "TB": 1e12,
}

// ParseSize reads a size: a non-negative number with an optional unit, a
// bare number being bytes. Bare K, M, G, T are binary (as in Slurm);
// KiB/MiB/GiB/TiB and Kubernetes' Ki/Mi/Gi/Ti are binary; KB/MB/GB/TB are
// decimal. Units are case-insensitive. A fraction of a byte is refused in
// bytes and dropped in larger units (1.3GiB).
func ParseSize(s string) (Size, error) { return parseSize(s, "B") }

// parseSize is ParseSize with bare, the unit of a bare number.
func parseSize(s, bare string) (Size, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	if unit == "" {
		unit = bare
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, t[i:])
	}
	if num == "" {
		return 0, fmt.Errorf("invalid size %q: want a number such as 512MiB or 50GiB", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %q is not a number", s, num)
	}
	b := f * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	if b != math.Trunc(b) && mult == 1 {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	return Size(b), nil
}

// GiB is a size whose bare number means GiB, as --memory-gb reads it: 4,
// 0.5, or any size with a unit (4G, 512MiB).
type GiB Size

// UnmarshalText lets flag parsers accept sizes in GiB.
func (z *GiB) UnmarshalText(b []byte) error {
	v, err := parseSize(string(b), "GIB")
	*z = GiB(v)
	return err
}

// MiB is a size whose bare number means MiB, as sbatch's --mem reads it:
// 4000, or any size with a unit (4G).
type MiB Size

// UnmarshalText lets flag parsers accept sizes in MiB.
func (z *MiB) UnmarshalText(b []byte) error {
	v, err := parseSize(string(b), "MIB")
	*z = MiB(v)
	return err
}

// UnmarshalText lets flag parsers accept sizes.
func (z *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*z = v
	return nil
}

// String formats the size with the largest binary unit that divides it.
func (z Size) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if z != 0 && int64(z)%u.n == 0 {
			return strconv.FormatInt(int64(z)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(z), 10) + "B"
}

// MarshalText formats the size as String does.
func (z Size) MarshalText() ([]byte, error) { return []byte(z.String()), nil }
