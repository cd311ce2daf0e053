package hfhub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"strata/runtime/catalog"
)

// ParseRef splits "ORG/NAME[:TAG]" into repository and tag.
func ParseRef(ref string) (repo, tag string, err error) {
	repo, tag, _ = strings.Cut(ref, ":")
	if err := CheckRepo(repo); err != nil {
		return "", "", err
	}
	return repo, tag, nil
}

// Pull downloads a model from repo's main revision: the file named (with
// the other parts when it is part 1 of a split model), else the one tag
// selects (Select). It returns the snapshot paths, first part first.
func (c *Client) Pull(ctx context.Context, repo, tag, file string) ([]string, error) {
	files, err := c.Files(ctx, repo, "main")
	if err != nil {
		return nil, err
	}
	var pick []RepoFile
	if file != "" {
		for _, f := range files {
			if strings.EqualFold(f.Path, file) {
				pick = withParts(files, f)
				break
			}
		}
		if pick == nil {
			return nil, fmt.Errorf("%w: %s has no file %q", ErrNotFound, repo, file)
		}
	} else if pick, err = Select(files, tag); err != nil {
		return nil, fmt.Errorf("%s: %w", repo, err)
	}
	var paths []string
	for _, f := range pick {
		var p string
		if err := validFile(f.Path); err != nil {
			return paths, err
		}
		if c.Offline {
			p, err = c.Download(ctx, repo, "main", f.Path)
		} else {
			p, err = c.download(ctx, repo, "main", f.Path, &f)
		}
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// ReadRange reads len(dst) bytes at off of file in repo at revision
// (a commit) with one HTTP Range request: the hub's resolve URL, then the
// storage host it redirects to (never with the token). It is how a node
// fetches the layers it needs of a model pulled elsewhere when no peer
// holds them; the caller checks the bytes against their digest. The
// repository comes from a peer's manifest, so the token goes with the
// request only for a repository this machine pulled itself (it is in the
// cache): a peer cannot have the node use its owner's access to a gated
// or private repository the owner never asked for. Others are read
// anonymously (public repositories work).
func (c *Client) ReadRange(ctx context.Context, repo, revision, file string, off int64, dst []byte) error {
	if err := CheckRepo(repo); err != nil {
		return err
	}
	if err := validFile(file); err != nil {
		return err
	}
	if off < 0 || len(dst) == 0 {
		return fmt.Errorf("hfhub: range of %d bytes at %d", len(dst), off)
	}
	if c.Offline {
		return ErrOffline
	}
	hdr := http.Header{}
	hdr.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(len(dst))-1))
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.endpoint(), repo, url.PathEscape(revision), escapePath(file))
	resp, err := c.doWith(ctx, http.MethodGet, u, hdr.Clone(), c.pulled(repo))
	if err != nil {
		return err
	}
	for hops := 0; resp.StatusCode/100 == 3; hops++ {
		loc, err := resp.Location()
		resp.Body.Close()
		if err != nil || hops >= 5 {
			return fmt.Errorf("hfhub: %s: bad redirect (%v)", u, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
		if err != nil {
			return err
		}
		req.Header = hdr.Clone()
		if resp, err = c.send(req, c.sameHost(loc.String())); err != nil {
			return err
		}
	}
	defer resp.Body.Close()
	want := fmt.Sprintf("bytes %d-%d/", off, off+int64(len(dst))-1)
	if resp.StatusCode != http.StatusPartialContent || !strings.HasPrefix(resp.Header.Get("Content-Range"), want) {
		return fmt.Errorf("hfhub: %s: asked for %s, got %s %q", u, hdr.Get("Range"), resp.Status, resp.Header.Get("Content-Range"))
	}
	if _, err := io.ReadFull(resp.Body, dst); err != nil {
		return fmt.Errorf("hfhub: %s: range cut: %w", u, err)
	}
	return nil
}

// pulled reports whether this machine's cache holds repo (it was pulled
// here).
func (c *Client) pulled(repo string) bool {
	_, err := os.Stat(filepath.Join(catalog.RepoDir(c.cache(), repo), "snapshots"))
	return err == nil
}
