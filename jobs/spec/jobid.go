package spec

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// JobID names a job, or one task of an array job.
type JobID struct {
	// ID is the job number, starting at 1.
	ID int64
	// Index is the array task index, or -1 for a plain job or an array as a
	// whole.
	Index int
}

// ParseJobID reads "42" (a job, or an array as a whole) or "42_7" (task 7 of
// array job 42). Surrounding spaces are ignored.
func ParseJobID(s string) (JobID, error) {
	j, err := parseJobID(strings.TrimSpace(s))
	if err != nil {
		return JobID{}, fmt.Errorf("invalid job id %q: %v", s, err)
	}
	return j, nil
}

func parseJobID(t string) (JobID, error) {
	if t == "" {
		return JobID{}, errors.New("empty")
	}
	idText, indexText, isTask := strings.Cut(t, "_")
	if idText == "" {
		return JobID{}, errors.New("missing job number before _")
	}
	id, err := parseNat(idText, math.MaxInt64)
	switch {
	case errors.Is(err, errTooLarge):
		return JobID{}, errors.New("job number too large")
	case err != nil && idText[0] == '-':
		return JobID{}, errors.New("must not be negative")
	case err != nil:
		return JobID{}, fmt.Errorf("%q is not a job number", idText)
	case id == 0:
		return JobID{}, errors.New("job ids start at 1")
	}
	j := JobID{ID: id, Index: -1}
	if !isTask {
		return j, nil
	}
	if indexText == "" {
		return JobID{}, errors.New("missing array index after _")
	}
	if strings.Contains(indexText, "_") {
		return JobID{}, errors.New("more than one _")
	}
	n, err := parseNat(indexText, MaxArrayIndex)
	switch {
	case errors.Is(err, errTooLarge):
		return JobID{}, fmt.Errorf("array index %s is above the maximum %d", indexText, MaxArrayIndex)
	case err != nil && indexText[0] == '-':
		return JobID{}, errors.New("array index must not be negative")
	case err != nil:
		return JobID{}, fmt.Errorf("%q is not an array index", indexText)
	}
	j.Index = int(n)
	return j, nil
}

// String gives "42" for a job or "42_7" for an array task.
func (j JobID) String() string {
	if j.IsTask() {
		return fmt.Sprintf("%d_%d", j.ID, j.Index)
	}
	return fmt.Sprintf("%d", j.ID)
}

// IsTask reports whether j names one task of an array job.
func (j JobID) IsTask() bool { return j.Index >= 0 }
