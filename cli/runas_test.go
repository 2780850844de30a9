package cli

import (
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
)

func TestRunAsUser(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatalf("the user nobody is required (RBS_TEST_REQUIRE_ALL=1): %v", err)
		}
		t.Skipf("this machine has no user nobody: %v; set RBS_TEST_REQUIRE_ALL=1 to make this a failure", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	for _, tc := range []struct {
		name  string
		value string
		euid  int
		err   string // in the error; "" for none
		self  bool   // the worker's own user: nil
	}{
		{"by name", "nobody", 0, "", false},
		{"by uid", nobody.Uid, 0, "", false},
		{"unknown name", "rbs-no-such-user", 0, `--run-as "rbs-no-such-user": no such user`, false},
		{"unknown uid", "4000000000", 0, `--run-as "4000000000": no such user`, false},
		{"another user, not root", "nobody", uid + 1, `--run-as "nobody": only a worker started as root`, false},
		{"itself, not root", nobody.Uid, uid, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := runAsUser(tc.value, tc.euid)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("runAsUser(%q) = %+v, %v; want an error with %q", tc.value, u, err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case tc.self:
				if u != nil {
					t.Fatalf("runAsUser(%q) as uid %d = %+v, want nil: payloads run as the worker", tc.value, tc.euid, u)
				}
			case u == nil || u.Name != "nobody" || strconv.Itoa(int(u.UID)) != nobody.Uid || strconv.Itoa(int(u.GID)) != nobody.Gid || u.Home != nobody.HomeDir:
				t.Fatalf("runAsUser(%q) = %+v, want nobody (uid %s, gid %s, home %s)", tc.value, u, nobody.Uid, nobody.Gid, nobody.HomeDir)
			}
		})
	}
}
