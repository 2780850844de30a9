package spec

import (
	"slices"
	"testing"
)

func TestParseDeps(t *testing.T) {
	job := func(id int64) JobID { return JobID{ID: id, Index: -1} }
	for _, tc := range []struct {
		in   string
		want []Dep
		strs []string
	}{
		{"afterok:12", []Dep{{AfterOK, job(12)}}, []string{"afterok:12"}},
		{"afterok:12,afterany:13:14",
			[]Dep{{AfterOK, job(12)}, {AfterAny, job(13)}, {AfterAny, job(14)}},
			[]string{"afterok:12", "afterany:13", "afterany:14"}},
		{"afternotok:15_3", []Dep{{AfterNotOK, JobID{ID: 15, Index: 3}}}, []string{"afternotok:15_3"}},
		{"afterok:12,afterany:12", []Dep{{AfterOK, job(12)}, {AfterAny, job(12)}}, []string{"afterok:12", "afterany:12"}},
		{"afterok:12:12_0", []Dep{{AfterOK, job(12)}, {AfterOK, JobID{ID: 12, Index: 0}}}, []string{"afterok:12", "afterok:12_0"}},
		{" afterany:7 ", []Dep{{AfterAny, job(7)}}, []string{"afterany:7"}},
	} {
		got, err := ParseDeps(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseDeps(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		for i, d := range got {
			if s := d.String(); s != tc.strs[i] {
				t.Errorf("ParseDeps(%q)[%d].String() = %q, want %q", tc.in, i, s, tc.strs[i])
			}
		}
	}
}

func TestParseDepsRejects(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{"", "empty"},
		{" ", "empty"},
		{"afterok", "afterok needs a job id"},
		{"afterok:", "afterok needs a job id"},
		{"before:12", `unknown kind "before" (use afterok, afterany or afternotok)`},
		{"AfterOK:12", `unknown kind "AfterOK"`},
		{":12", `unknown kind ""`},
		{"afterok:x", `job id "x": "x" is not a job number`},
		{"afterok:0", "job ids start at 1"},
		{"afterok:12:", `job id "": empty`},
		{"afterok: 12", `job id " 12"`},
		{"afterok:12,,afterany:3", "empty item"},
		{"afterok:12,", "empty item"},
		{"afterok:12,afterok:12", "afterok:12 appears twice"},
		{"afterany:3_1:3_1", "afterany:3_1 appears twice"},
	} {
		_, err := ParseDeps(tc.in)
		checkRejected(t, tc.in, err, tc.reason)
	}
}
