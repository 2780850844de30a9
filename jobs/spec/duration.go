package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxDuration is the longest time limit ParseDuration accepts.
const MaxDuration = 365 * 24 * time.Hour

const maxSeconds = int64(MaxDuration / time.Second)

var errTooLong = errors.New("too long (at most 365 days)")

// ParseDuration reads a job time limit. It accepts unit groups such as
// "90s", "2h", "1d2h" or "1h30m" (units d, h, m, s, each at most once and in
// that order) and Slurm's forms "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM"
// and "D-HH:MM:SS". A bare integer means minutes. The limit must be positive
// and at most MaxDuration; surrounding spaces are ignored.
func ParseDuration(s string) (time.Duration, error) {
	secs, err := parseSeconds(strings.TrimSpace(s), false)
	if err != nil {
		return 0, fmt.Errorf("invalid time limit %q: %v", s, err)
	}
	return time.Duration(secs) * time.Second, nil
}

// parseSeconds reads a duration in ParseDuration's grammar, zero too when
// zero says so.
func parseSeconds(t string, zero bool) (int64, error) {
	if t == "" {
		return 0, errors.New("empty")
	}
	if t[0] == '-' {
		return 0, errors.New("must not be negative")
	}
	var secs int64
	var err error
	if strings.ContainsAny(t, ":-") || strings.Trim(t, "0123456789") == "" {
		secs, err = parseClock(t)
	} else {
		secs, err = parseUnits(t)
	}
	switch {
	case err != nil:
		return 0, err
	case secs == 0 && !zero:
		return 0, errors.New("must be positive")
	case secs > maxSeconds:
		return 0, errTooLong
	}
	return secs, nil
}

// clockField is one colon-separated field of a Slurm time limit.
type clockField struct {
	name string
	secs int64
}

var (
	hoursField   = clockField{"hours", 3600}
	minutesField = clockField{"minutes", 60}
	secondsField = clockField{"seconds", 1}
)

// parseClock reads Slurm's "[D-]A[:B[:C]]" forms.
func parseClock(t string) (int64, error) {
	var total int64
	rest := t
	dayText, afterDays, hasDays := strings.Cut(t, "-")
	if hasDays {
		days, err := clockNumber(dayText, "days", maxSeconds)
		if err != nil {
			return 0, err
		}
		total, rest = days*86400, afterDays
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, errors.New("too many fields (want at most D-HH:MM:SS)")
	}
	var fields []clockField
	switch {
	case hasDays:
		fields = []clockField{hoursField, minutesField, secondsField}[:len(parts)]
	case len(parts) == 1:
		fields = []clockField{minutesField}
	default:
		fields = []clockField{hoursField, minutesField, secondsField}[3-len(parts):]
	}
	for i, p := range parts {
		max := int64(59)
		switch {
		case i == 0 && hasDays:
			max = 23
		case i == 0:
			max = maxSeconds
		}
		n, err := clockNumber(p, fields[i].name, max)
		if err != nil {
			return 0, err
		}
		total += n * fields[i].secs
	}
	return total, nil
}

// clockNumber reads one field of a Slurm time limit; values above max are
// out of range, except that the unbounded leading field reports errTooLong.
func clockNumber(text, name string, max int64) (int64, error) {
	if text == "" {
		return 0, fmt.Errorf("missing %s", name)
	}
	n, err := parseNat(text, max)
	switch {
	case errors.Is(err, errTooLarge) && max == maxSeconds:
		return 0, errTooLong
	case errors.Is(err, errTooLarge):
		return 0, fmt.Errorf("%s %s out of range 0-%d", name, text, max)
	case err != nil:
		return 0, fmt.Errorf("%s %q is not a whole number", name, text)
	}
	return n, nil
}

const unitOrder = "dhms"

var unitSeconds = [len(unitOrder)]int64{86400, 3600, 60, 1}

// parseUnits reads "<integer><unit>" groups such as "1d2h3m4s".
func parseUnits(t string) (int64, error) {
	var total int64
	next := 0 // index in unitOrder of the largest unit still allowed
	for t != "" {
		i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' })
		if i < 0 {
			return 0, fmt.Errorf("missing unit after %s (use d, h, m or s)", t)
		}
		num, rest := t[:i], t[i:]
		if rest[0] == '.' {
			return 0, errors.New("fractions are not allowed")
		}
		j := strings.IndexFunc(rest, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })
		if j < 0 {
			j = len(rest)
		}
		unit := rest[:j]
		if unit == "" {
			r, _ := utf8.DecodeRuneInString(rest)
			return 0, fmt.Errorf("unexpected character %q", r)
		}
		u := strings.Index(unitOrder, unit)
		if len(unit) != 1 || u < 0 {
			return 0, fmt.Errorf("unknown unit %q (use d, h, m or s)", unit)
		}
		if num == "" {
			return 0, fmt.Errorf("missing number before %q", unit)
		}
		if u < next {
			return 0, errors.New("units must appear in order d, h, m, s, each at most once")
		}
		n, err := parseNat(num, maxSeconds)
		if err != nil {
			return 0, errTooLong
		}
		total += n * unitSeconds[u]
		next = u + 1
		t = rest[j:]
	}
	return total, nil
}

// FormatDuration prints d in Slurm's form: "D-HH:MM:SS" from one day up,
// "HH:MM:SS" below. Fractions of a second are dropped and a negative d gets a
// leading minus sign.
func FormatDuration(d time.Duration) string {
	sign := ""
	secs := int64(d / time.Second)
	if secs < 0 {
		sign, secs = "-", -secs
	}
	h, m, s := secs/3600, secs/60%60, secs%60
	if h >= 24 {
		return fmt.Sprintf("%s%d-%02d:%02d:%02d", sign, h/24, h%24, m, s)
	}
	return fmt.Sprintf("%s%02d:%02d:%02d", sign, h, m, s)
}

// Duration is a length of time that flags accept in ParseDuration's
// grammar, so that every duration flag reads the same text: 90s, 30m, 2h,
// 1d2h, or Slurm's MM, MM:SS, [D-]HH:MM:SS, a bare number being minutes.
type Duration time.Duration

// UnmarshalText lets flag parsers accept durations. Its error names the
// text, the flag's parser the flag: --time: invalid duration "0": must be
// positive.
func (d *Duration) UnmarshalText(b []byte) error {
	secs, err := parseSeconds(strings.TrimSpace(string(b)), false)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %v", b, err)
	}
	*d = Duration(time.Duration(secs) * time.Second)
	return nil
}

// Delay is a Duration that may be zero: how long until something starts,
// "0s" being now.
type Delay time.Duration

// UnmarshalText lets flag parsers accept delays.
func (d *Delay) UnmarshalText(b []byte) error {
	secs, err := parseSeconds(strings.TrimSpace(string(b)), true)
	if err != nil {
		return fmt.Errorf("invalid delay %q: %v", b, err)
	}
	*d = Delay(time.Duration(secs) * time.Second)
	return nil
}
