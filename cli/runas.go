package cli

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"

	"github.com/rbs-build/rbs/rbe/process"
)

// runAsUser resolves `rbs remote worker --run-as`: a user name, or the
// numeric uid of a user, known to the system, with that user's groups. euid
// is the worker's effective uid: only root may run payloads as someone
// else. The worker's own user gives nil, as no --run-as does: payloads run
// as the worker.
func runAsUser(name string, euid int) (*process.User, error) {
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr == nil {
			u, err = user.LookupId(name)
		}
	}
	var unknownID user.UnknownUserIdError
	if errors.As(err, &unknown) || errors.As(err, &unknownID) {
		return nil, fmt.Errorf("--run-as %q: no such user; give a user name or numeric uid known to this machine", name)
	}
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: %w", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: uid %q is not a number", name, u.Uid)
	}
	if int(uid) == euid {
		return nil, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("--run-as %q: only a worker started as root can run payloads as another user, and this one runs as uid %d; start it as root, or drop --run-as", name, euid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: gid %q is not a number", name, u.Gid)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: listing the user's groups: %w", name, err)
	}
	groups := make([]uint32, 0, len(ids))
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--run-as %q: group id %q is not a number", name, id)
		}
		groups = append(groups, uint32(g))
	}
	return &process.User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Groups: groups, Home: u.HomeDir}, nil
}
