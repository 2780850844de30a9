package spec

import "errors"

var (
	errNotInteger = errors.New("not an integer")
	errTooLarge   = errors.New("too large")
)

// parseNat reads s, a non-empty run of ASCII digits, as an integer in
// [0, max]. It fails with errNotInteger for anything else (signs, spaces,
// exponents, fractions) and with errTooLarge above max.
func parseNat(s string, max int64) (int64, error) {
	if s == "" {
		return 0, errNotInteger
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errNotInteger
		}
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i] - '0')
		if n > (max-d)/10 {
			return 0, errTooLarge
		}
		n = n*10 + d
	}
	return n, nil
}
