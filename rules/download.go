package rules

// Downloads of repository rules (repository_ctx.download,
// download_and_extract and extract), as Bazel makes them: each URL tried
// in turn (http, https and file), the content checked against sha256 or
// integrity (an SRI sha256 or sha384 or sha512) before it is used, and
// kept in the repository cache (content_addressable/sha256/HEX/file, as
// Bazel lays it out) so that a download asked again with its checksum is
// not made again. Archives: zip, tar, tar.gz (tgz), tar.bz2, tar.zst;
// strip_prefix drops a leading directory; no entry may land outside the
// output directory.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// maxDownload bounds one download.
const maxDownload = 4 << 30

// checksum is what a download must match: a sha256 in hex, or an SRI
// integrity string.
type checksum struct {
	algo string // sha256, sha384, sha512
	want []byte
}

func parseChecksum(sha string, integrity string) (*checksum, error) {
	switch {
	case sha != "":
		b, err := hex.DecodeString(sha)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("sha256 %q: want 64 hex digits", sha)
		}
		return &checksum{algo: "sha256", want: b}, nil
	case integrity != "":
		algo, b64, ok := strings.Cut(integrity, "-")
		b, err := base64.StdEncoding.DecodeString(b64)
		sizes := map[string]int{"sha256": sha256.Size, "sha384": sha512.Size384, "sha512": sha512.Size}
		if !ok || err != nil || sizes[algo] == 0 || len(b) != sizes[algo] {
			return nil, fmt.Errorf("integrity %q: want sha256-, sha384- or sha512- and the digest in base64", integrity)
		}
		return &checksum{algo: algo, want: b}, nil
	}
	return nil, nil
}

func (c *checksum) hasher() hash.Hash {
	switch c.algo {
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return sha256.New()
}

// download fetches the first of urls that answers, checked against sum
// (when given), through the repository cache; it returns the content's
// path in the cache and its sha256.
func (c *repoContext) download(urls []string, sum *checksum) (string, string, error) {
	cache := filepath.Join(filepath.Dir(c.ws.cfg.RepoDir), "content_addressable", "sha256")
	if sum != nil && sum.algo == "sha256" {
		p := filepath.Join(cache, hex.EncodeToString(sum.want), "file")
		if _, err := os.Stat(p); err == nil {
			return p, hex.EncodeToString(sum.want), nil
		}
	}
	var errs []string
	for _, u := range urls {
		body, err := fetchURL(u)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if sum != nil {
			h := sum.hasher()
			h.Write(body)
			if got := h.Sum(nil); !bytes.Equal(got, sum.want) {
				errs = append(errs, fmt.Sprintf("%s: checksum mismatch: want %s %s, got %s", u, sum.algo,
					base64.StdEncoding.EncodeToString(sum.want), base64.StdEncoding.EncodeToString(got)))
				continue
			}
		}
		digest := sha256.Sum256(body)
		hexSum := hex.EncodeToString(digest[:])
		dir := filepath.Join(cache, hexSum)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", err
		}
		tmp, err := os.CreateTemp(dir, "file.*")
		if err != nil {
			return "", "", err
		}
		_, werr := tmp.Write(body)
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return "", "", werr
		}
		p := filepath.Join(dir, "file")
		if err := os.Rename(tmp.Name(), p); err != nil {
			return "", "", err
		}
		return p, hexSum, nil
	}
	if len(urls) == 0 {
		return "", "", fmt.Errorf("no url given")
	}
	return "", "", fmt.Errorf("downloading failed: %s", strings.Join(errs, "; "))
}

// fetchURL reads one URL: http, https or file.
func fetchURL(raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q: %v", raw, err)
	}
	switch u.Scheme {
	case "file":
		f, err := os.Open(u.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readBounded(raw, f)
	case "http", "https":
		client := &http.Client{Timeout: 10 * time.Minute}
		resp, err := client.Get(raw)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", raw, resp.Status)
		}
		return readBounded(raw, resp.Body)
	}
	return nil, fmt.Errorf("url %q: rbs downloads http, https and file URLs", raw)
}

func readBounded(what string, r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDownload+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	if len(b) > maxDownload {
		return nil, fmt.Errorf("%s: larger than %d bytes", what, maxDownload)
	}
	return b, nil
}

// downloadArgs reads the url (a string or a list of them), sha256 and
// integrity arguments of fn, and downloads: the URLs, and the content's
// path in the repository cache and its sha256.
func (c *repoContext) downloadArgs(fn string, urlv starlark.Value, sha, integrity string) ([]string, string, string, error) {
	urls := []string{}
	if s, ok := starlark.AsString(urlv); ok {
		urls = append(urls, s)
	} else {
		var err error
		if urls, err = stringList(urlv); err != nil {
			return nil, "", "", fmt.Errorf("%s: url: %v", fn, err)
		}
	}
	sum, err := parseChecksum(sha, integrity)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %v", fn, err)
	}
	src, got, err := c.download(urls, sum)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %v", fn, err)
	}
	return urls, src, got, nil
}

// downloadResult is what download returns: struct(success, sha256,
// integrity).
func downloadResult(sha string) starlark.Value {
	b, _ := hex.DecodeString(sha)
	return starlarkstruct.FromStringDict(starlark.String("struct"), starlark.StringDict{
		"success":   starlark.True,
		"sha256":    starlark.String(sha),
		"integrity": starlark.String("sha256-" + base64.StdEncoding.EncodeToString(b)),
	})
}

func (c *repoContext) downloadBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var urlv starlark.Value
	var output starlark.Value = starlark.String("")
	var sha, integrity, canonicalID string
	var executable, allowFail bool
	var authv, headers, block starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "url", &urlv, "output?", &output, "sha256?", &sha, "executable?", &executable,
		"allow_fail?", &allowFail, "canonical_id?", &canonicalID, "auth?", &authv, "headers?", &headers, "integrity?", &integrity, "block?", &block); err != nil {
		return nil, err
	}
	urls, src, got, err := c.downloadArgs(b.Name(), urlv, sha, integrity)
	if err != nil {
		return nil, err
	}
	if o, _ := starlark.AsString(output); o == "" {
		output = starlark.String(path.Base(urls[0]))
	}
	dst, err := c.writable(b.Name(), output)
	if err != nil {
		return nil, err
	}
	content, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	if err := writeFile(dst, content, executable); err != nil {
		return nil, err
	}
	return downloadResult(got), nil
}

func (c *repoContext) downloadAndExtract(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var urlv starlark.Value
	var output starlark.Value = starlark.String("")
	var sha, typ, stripPrefix, canonicalID, integrity string
	var allowFail bool
	var authv, headers, rename starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "url", &urlv, "output?", &output, "sha256?", &sha, "type?", &typ,
		"stripPrefix?", &stripPrefix, "strip_prefix?", &stripPrefix, "allow_fail?", &allowFail, "canonical_id?", &canonicalID,
		"auth?", &authv, "headers?", &headers, "integrity?", &integrity, "rename_files?", &rename); err != nil {
		return nil, err
	}
	urls, src, got, err := c.downloadArgs(b.Name(), urlv, sha, integrity)
	if err != nil {
		return nil, err
	}
	dst, err := c.writable(b.Name(), output)
	if err != nil {
		return nil, err
	}
	if typ == "" {
		typ = archiveType(urls[0])
	}
	if err := extractArchive(src, typ, dst, stripPrefix); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", b.Name(), urls[0], err)
	}
	return downloadResult(got), nil
}

func (c *repoContext) extract(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var archive starlark.Value
	var output starlark.Value = starlark.String("")
	var stripPrefix string
	var rename, watch starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "archive", &archive, "output?", &output, "stripPrefix?", &stripPrefix,
		"strip_prefix?", &stripPrefix, "rename_files?", &rename, "watch_archive?", &watch); err != nil {
		return nil, err
	}
	src, err := c.resolve(archive)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	dst, err := c.writable(b.Name(), output)
	if err != nil {
		return nil, err
	}
	return starlark.None, extractArchive(src, archiveType(src), dst, stripPrefix)
}

// archiveType is an archive's type by its name.
func archiveType(name string) string {
	name = strings.ToLower(name)
	for _, t := range []string{".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.zst", ".tzst", ".tar", ".zip", ".jar", ".war", ".tar.xz", ".txz"} {
		if strings.HasSuffix(name, t) {
			return strings.TrimPrefix(t, ".")
		}
	}
	return ""
}

// extractArchive unpacks archive file src of type typ into dst, dropping
// prefix (a directory) from every entry.
func extractArchive(src, typ, dst, prefix string) error {
	prefix = strings.Trim(prefix, "/")
	place := func(name string) (string, bool, error) {
		name = strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(name)), "/")
		if prefix != "" {
			rest, ok := strings.CutPrefix(name, prefix)
			if !ok || rest != "" && rest[0] != '/' {
				return "", false, nil
			}
			name = strings.TrimPrefix(rest, "/")
		}
		if name == "" {
			return "", false, nil
		}
		if err := inside(name); err != nil {
			return "", false, err
		}
		return filepath.Join(dst, filepath.FromSlash(name)), true, nil
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if typ == "zip" || typ == "jar" || typ == "war" {
		info, err := f.Stat()
		if err != nil {
			return err
		}
		zr, err := zip.NewReader(f, info.Size())
		if err != nil {
			return err
		}
		for _, zf := range zr.File {
			p, ok, err := place(zf.Name)
			if err != nil || !ok {
				if err != nil {
					return fmt.Errorf("entry %q: %v", zf.Name, err)
				}
				continue
			}
			if zf.FileInfo().IsDir() {
				if err := os.MkdirAll(p, 0o755); err != nil {
					return err
				}
				continue
			}
			rc, err := zf.Open()
			if err != nil {
				return err
			}
			err = writeEntry(p, rc, zf.Mode())
			rc.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	var r io.Reader = f
	switch typ {
	case "tar.gz", "tgz":
		gz, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	case "tar.bz2", "tbz":
		r = bzip2.NewReader(f)
	case "tar.zst", "tzst":
		zr, err := zstd.NewReader(f)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	case "tar":
	default:
		return fmt.Errorf("archive type %q: rbs extracts zip, jar, war, tar, tar.gz, tgz, tar.bz2 and tar.zst", typ)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p, ok, err := place(h.Name)
		if err != nil {
			return fmt.Errorf("entry %q: %v", h.Name, err)
		}
		if !ok {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeEntry(p, tr, os.FileMode(h.Mode))
		case tar.TypeSymlink:
			target := h.Linkname
			rel := strings.TrimPrefix(strings.TrimPrefix(p, dst), string(filepath.Separator))
			if filepath.IsAbs(target) || inside(path.Join(path.Dir(filepath.ToSlash(rel)), target)) != nil {
				return fmt.Errorf("entry %q: symlink to %q leaves the archive", h.Name, target)
			}
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.Remove(p)
			err = os.Symlink(target, p)
		}
		if err != nil {
			return err
		}
	}
}

func writeEntry(p string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	os.Remove(p)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
