package schema

import "testing"

func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"sh", "-c", "echo task $RBS_ARRAY_INDEX; sleep 2"}, `sh -c 'echo task $RBS_ARRAY_INDEX; sleep 2'`},
		{[]string{"python3", "train.py", "--lr=0.1", "a,b"}, `python3 train.py --lr=0.1 a,b`},
		{[]string{"echo", "it's", ""}, `echo 'it'\''s' ''`},
	} {
		if got := CommandLine(c.argv); got != c.want {
			t.Errorf("CommandLine(%q) = %s, want %s", c.argv, got, c.want)
		}
	}
}
