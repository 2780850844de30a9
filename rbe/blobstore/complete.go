package blobstore

import (
	"context"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/proto"
)

// maxDirectory bounds one Directory message Complete reads.
const maxDirectory = 16 << 20

// Complete reports whether s holds the whole tree under the Directory
// root: every Directory, and every file they name. Each distinct
// Directory is read once however often the tree names it.
func Complete(ctx context.Context, s Store, root digest.Digest) (bool, error) {
	queue, queued := []digest.Digest{root}, map[digest.Digest]bool{root: true}
	var files []digest.Digest
	seen := map[digest.Digest]bool{}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if d.Size() > maxDirectory {
			return false, fmt.Errorf("directory %s is over %d bytes", d, maxDirectory)
		}
		b, err := GetBytesMax(ctx, s, d, maxDirectory)
		if IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		dir := &repb.Directory{}
		if err := proto.Unmarshal(b, dir); err != nil {
			return false, fmt.Errorf("blob %s is not a Directory: %v", d, err)
		}
		for _, f := range dir.Files {
			fd, err := digest.FromProto(f.Digest)
			if err != nil {
				return false, fmt.Errorf("directory %s: file %q: %v", d, f.Name, err)
			}
			if !seen[fd] {
				seen[fd] = true
				files = append(files, fd)
			}
		}
		for _, c := range dir.Directories {
			cd, err := digest.FromProto(c.Digest)
			if err != nil {
				return false, fmt.Errorf("directory %s: child %q: %v", d, c.Name, err)
			}
			if !queued[cd] {
				queued[cd] = true
				queue = append(queue, cd)
			}
		}
	}
	for len(files) > 0 {
		n := min(len(files), 10000)
		missing, err := s.FindMissing(ctx, files[:n])
		if err != nil {
			return false, err
		}
		if len(missing) > 0 {
			return false, nil
		}
		files = files[n:]
	}
	return true, nil
}
