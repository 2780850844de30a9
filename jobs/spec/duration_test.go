package spec

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"30m", 30 * time.Minute},
		{"2h", 2 * time.Hour},
		{"1d", day},
		{"1d2h", day + 2*time.Hour},
		{"1h30m", 90 * time.Minute},
		{"1d2h3m4s", day + 2*time.Hour + 3*time.Minute + 4*time.Second},
		{"1d4s", day + 4*time.Second},
		{"365d", 365 * day},
		{" 2h ", 2 * time.Hour},
		{"30", 30 * time.Minute},
		{"0030", 30 * time.Minute},
		{"1:30", 90 * time.Second},
		{"2:00:00", 2 * time.Hour},
		{"100:00:00", 100 * time.Hour},
		{"1:2:3", time.Hour + 2*time.Minute + 3*time.Second},
		{"90:59", 90*time.Minute + 59*time.Second},
		{"1-0", day},
		{"1-12", day + 12*time.Hour},
		{"1-12:30", day + 12*time.Hour + 30*time.Minute},
		{"1-12:30:15", day + 12*time.Hour + 30*time.Minute + 15*time.Second},
		{"364-23:59:59", 365*day - time.Second},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationRejects(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{"", "empty"},
		{"   ", "empty"},
		{"-5", "negative"},
		{"-1h", "negative"},
		{"0", "must be positive"},
		{"0h0m", "must be positive"},
		{"0:00:00", "must be positive"},
		{"0-0", "must be positive"},
		{"5x", `unknown unit "x"`},
		{"5min", `unknown unit "min"`},
		{"2H", `unknown unit "H"`},
		{"2h1d", "in order"},
		{"1h1h", "at most once"},
		{"30s5m", "in order"},
		{"h", `missing number before "h"`},
		{"1hm", `unknown unit "hm"`},
		{"1h30", "missing unit after 30"},
		{"1.5h", "fractions"},
		{"1.5", "fractions"},
		{"366d", "too long"},
		{"8761h", "too long"},
		{"366-0", "too long"},
		{"9000:00:00", "too long"},
		{"99999999999999999999999m", "too long"},
		{"99999999999999999999999", "too long"},
		{"30m!", "unexpected character '!'"},
		{"30m x", "unexpected character ' '"},
		{"1:2:3:4", "too many fields"},
		{"1-2:3:4:5", "too many fields"},
		{"1:60", "seconds 60 out of range 0-59"},
		{"1:60:00", "minutes 60 out of range 0-59"},
		{"1-24", "hours 24 out of range 0-23"},
		{"1-2:60", "minutes 60 out of range"},
		{"1::3", "missing minutes"},
		{"1:", "missing seconds"},
		{"1-", "missing hours"},
		{"-", "negative"},
		{"1:3x", `seconds "3x" is not a whole number`},
		{"1:30.5", `seconds "30.5" is not a whole number`},
		{"1h-2", `days "1h" is not a whole number`},
		{"1--2", `hours "-2" is not a whole number`},
	} {
		_, err := ParseDuration(tc.in)
		checkRejected(t, tc.in, err, tc.reason)
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "00:00:00"},
		{90 * time.Second, "00:01:30"},
		{1500 * time.Millisecond, "00:00:01"},
		{23*time.Hour + 59*time.Minute + 59*time.Second, "23:59:59"},
		{24 * time.Hour, "1-00:00:00"},
		{26*time.Hour + 3*time.Minute + 4*time.Second, "1-02:03:04"},
		{365 * 24 * time.Hour, "365-00:00:00"},
		{-90 * time.Second, "-00:01:30"},
	} {
		if got := FormatDuration(tc.in); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormatDurationRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 59 * time.Minute, 25*time.Hour + time.Second, MaxDuration} {
		s := FormatDuration(d)
		got, err := ParseDuration(s)
		if err != nil || got != d {
			t.Errorf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", d, s, got, err)
		}
	}
}
