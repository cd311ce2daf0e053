// Package hfhub downloads files from the Hugging Face hub into the hub's
// cache layout, the one huggingface_hub, llama.cpp and other tools share:
//
//	CACHE/models--ORG--NAME/blobs/ETAG                  the file's bytes
//	CACHE/models--ORG--NAME/snapshots/COMMIT/PATH       symlink to ../../blobs/ETAG
//	CACHE/models--ORG--NAME/refs/main                   COMMIT
//
// A download goes to blobs/ETAG.incomplete, resumes from its length with
// an HTTP Range request after a cut, and is renamed to blobs/ETAG only
// once its SHA-256 (git SHA-1 for small non-LFS files) matches the ETag:
// no partial file is ever left where a complete one is expected.
//
// FromEnv finds the cache and the token as huggingface_hub does;
// Client.Files lists a repository's files at a revision, Select picks a
// quantization's file (and its split parts) the way llama.cpp's -hf does,
// and Client.Download fetches each into the cache and returns its
// snapshot path (strata pull).
package hfhub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"strata/runtime/catalog"
)

// DefaultEndpoint is the hub unless HF_ENDPOINT says otherwise.
const DefaultEndpoint = "https://huggingface.co"

// Errors.
var (
	ErrOffline  = errors.New("hfhub: offline (HF_HUB_OFFLINE) and not in the cache")
	ErrChecksum = errors.New("hfhub: downloaded file does not match its checksum")
	ErrNotFound = errors.New("hfhub: not found")
)

// Client talks to one hub. Zero values pick the defaults noted; FromEnv
// reads them the way huggingface_hub does.
type Client struct {
	// Endpoint is the hub's base URL; "" = DefaultEndpoint.
	Endpoint string
	// Token is sent as a bearer token to Endpoint only, never to the
	// storage hosts downloads are redirected to.
	Token string
	// Cache is the hub cache directory; "" = catalog.HFCacheDir().
	Cache string
	// Offline uses only what the cache holds.
	Offline bool
	// HTTP is the client used; nil = one with no overall timeout (files
	// are large) that does not follow redirects itself.
	HTTP *http.Client
	// Progress, when set, hears each download's progress: done of total
	// bytes of file (done starts at what a resumed download already had).
	Progress func(file string, done, total int64)
	// Logf, when set, hears what the client waits for (rate limits, retries).
	Logf func(format string, args ...any)
	// Retries is how many times a failed request or cut download is tried
	// again; 0 = 5.
	Retries int
	// Backoff is the first wait between retries, doubling each time,
	// unless the hub says how long; 0 = 1s.
	Backoff time.Duration
}

// FromEnv returns a client configured from HF_ENDPOINT, HF_TOKEN (else
// the file $HF_HOME/token), HF_HUB_OFFLINE and the cache location
// catalog.HFCacheDir gives.
func FromEnv() *Client {
	c := &Client{Endpoint: os.Getenv("HF_ENDPOINT"), Token: strings.TrimSpace(os.Getenv("HF_TOKEN")), Cache: catalog.HFCacheDir()}
	if c.Token == "" {
		if b, err := os.ReadFile(filepath.Join(catalog.HFHome(), "token")); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	return c
}

func (c *Client) endpoint() string {
	if c.Endpoint == "" {
		return DefaultEndpoint
	}
	return strings.TrimRight(c.Endpoint, "/")
}

func (c *Client) cache() string {
	if c.Cache == "" {
		return catalog.HFCacheDir()
	}
	return c.Cache
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (c *Client) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// RepoFile is one file of a repository's tree.
type RepoFile struct {
	Path string
	Size int64
	// SHA256 is the hex SHA-256 of an LFS file's content ("" for small
	// files kept in git).
	SHA256 string
}

// validRepo checks "ORG/NAME".
var validRepo = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// CheckRepo reports whether repo is ORG/NAME.
func CheckRepo(repo string) error {
	if !validRepo.MatchString(repo) || strings.Contains(repo, "..") || strings.Contains(repo, "--") {
		return fmt.Errorf("hfhub: %q is not a repository (ORG/NAME)", repo)
	}
	return nil
}

// Files lists every file of the repository at revision, following the
// hub's pagination (Link: <...>; rel="next"). Offline, it lists the files
// of the cached snapshot instead.
func (c *Client) Files(ctx context.Context, repo, revision string) ([]RepoFile, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	if c.Offline {
		return c.cachedFiles(repo, revision)
	}
	next := fmt.Sprintf("%s/api/models/%s/tree/%s?recursive=true", c.endpoint(), repo, url.PathEscape(revision))
	var out []RepoFile
	for page := 0; next != ""; page++ {
		if page > 10000 {
			return nil, fmt.Errorf("hfhub: %s: more than 10000 pages of files", repo)
		}
		resp, err := c.do(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		var entries []struct {
			Type string `json:"type"`
			Path string `json:"path"`
			Size int64  `json:"size"`
			LFS  *struct {
				Oid  string `json:"oid"`
				Size int64  `json:"size"`
			} `json:"lfs"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&entries)
		link := resp.Header.Get("Link")
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("hfhub: %s: file list: %w", repo, err)
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			f := RepoFile{Path: e.Path, Size: e.Size}
			if e.LFS != nil {
				f.SHA256, f.Size = e.LFS.Oid, e.LFS.Size
			}
			out = append(out, f)
		}
		next = nextLink(link)
		if next != "" && !c.sameHost(next) {
			return nil, fmt.Errorf("hfhub: %s: next page on another host (%s)", repo, next)
		}
	}
	return out, nil
}

// nextLink returns the rel="next" URL of a Link header, or "".
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		u, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		return strings.Trim(strings.TrimSpace(u), "<>")
	}
	return ""
}

func (c *Client) sameHost(raw string) bool {
	u, err := url.Parse(raw)
	e, err2 := url.Parse(c.endpoint())
	return err == nil && err2 == nil && u.Host == e.Host && u.Scheme == e.Scheme
}

// cachedFiles lists the files of the snapshot revision names in the cache.
func (c *Client) cachedFiles(repo, revision string) ([]RepoFile, error) {
	dir := catalog.RepoDir(c.cache(), repo)
	commit := revision
	if b, err := os.ReadFile(filepath.Join(dir, "refs", revision)); err == nil {
		commit = strings.TrimSpace(string(b))
	}
	snap := filepath.Join(dir, "snapshots", commit)
	var out []RepoFile
	err := filepath.WalkDir(snap, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(snap, p)
			fi, err := os.Stat(p)
			if err == nil {
				out = append(out, RepoFile{Path: filepath.ToSlash(rel), Size: fi.Size()})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s@%s", ErrOffline, repo, revision)
	}
	return out, nil
}

// Select picks the model file a tag names among a repository's files, as
// llama.cpp does for -hf REPO:TAG: the first GGUF model file (not a
// projector, imatrix or draft model) whose path contains TAG followed by
// "." or "-", case-insensitively; with no tag, Q4_K_M, then Q8_0, then the
// first model file. A split model comes with all its parts, in order.
func Select(files []RepoFile, tag string) ([]RepoFile, error) {
	tags := []string{tag}
	if tag == "" {
		tags = []string{"Q4_K_M", "Q8_0", ""}
	}
	for _, t := range tags {
		for _, f := range files {
			if !isModelFile(f.Path) {
				continue
			}
			if n, _, split := catalog.Split(f.Path); split && n != 1 {
				continue
			}
			if t != "" && !tagIn(f.Path, t) {
				continue
			}
			return withParts(files, f), nil
		}
	}
	var have []string
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".gguf") {
			have = append(have, f.Path)
		}
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("%w: the repository has no GGUF files", ErrNotFound)
	}
	return nil, fmt.Errorf("%w: no GGUF file for tag %q (files: %s)", ErrNotFound, tag, strings.Join(have, ", "))
}

func tagIn(p, tag string) bool {
	up, ut := strings.ToUpper(p), strings.ToUpper(tag)
	for i := 0; ; {
		j := strings.Index(up[i:], ut)
		if j < 0 {
			return false
		}
		k := i + j + len(ut)
		if k < len(up) && (up[k] == '.' || up[k] == '-') {
			return true
		}
		i += j + 1
	}
}

// isModelFile says whether a path is a GGUF model, not one of the
// companion files repositories carry beside it.
func isModelFile(p string) bool {
	if !strings.HasSuffix(p, ".gguf") {
		return false
	}
	base := path.Base(p)
	for _, s := range []string{"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"} {
		if strings.Contains(base, s) {
			return false
		}
	}
	return true
}

// withParts returns f, or every part of the split model f starts, in order.
func withParts(files []RepoFile, f RepoFile) []RepoFile {
	_, count, split := catalog.Split(f.Path)
	if !split || count == 1 {
		return []RepoFile{f}
	}
	dir, name := path.Dir(f.Path), catalog.Name(f.Path)
	parts := make([]RepoFile, 0, count)
	for n := 1; n <= count; n++ {
		want := path.Join(dir, catalog.PartName(name, n, count))
		found := RepoFile{Path: want}
		for _, g := range files {
			if g.Path == want {
				found = g
				break
			}
		}
		parts = append(parts, found)
	}
	return parts
}

// meta is what a HEAD on a resolve URL tells.
type meta struct {
	commit, etag string
	size         int64
	location     string // where the bytes are (the CDN), "" = the resolve URL itself
}

// head asks the hub about one file without following the redirect to
// storage: the redirect's headers carry the LFS file's hash and size.
func (c *Client) head(ctx context.Context, repo, revision, file string) (meta, string, error) {
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.endpoint(), repo, url.PathEscape(revision), escapePath(file))
	resp, err := c.do(ctx, http.MethodHead, u, nil)
	if err != nil {
		return meta{}, u, err
	}
	resp.Body.Close()
	m := meta{commit: resp.Header.Get("X-Repo-Commit")}
	m.etag = resp.Header.Get("X-Linked-Etag")
	if m.etag == "" {
		m.etag = resp.Header.Get("ETag")
	}
	m.etag = strings.Trim(strings.TrimPrefix(m.etag, "W/"), `"`)
	size := resp.Header.Get("X-Linked-Size")
	if size == "" {
		size = resp.Header.Get("Content-Length")
	}
	m.size, _ = strconv.ParseInt(size, 10, 64)
	if resp.StatusCode/100 == 3 {
		loc, err := resp.Location()
		if err != nil {
			return meta{}, u, fmt.Errorf("hfhub: %s: redirect without a location", u)
		}
		m.location = loc.String()
	}
	if m.commit == "" || m.etag == "" || !validETag(m.etag) || len(m.commit) > 64 || strings.ContainsAny(m.commit, `/\.`) {
		return meta{}, u, fmt.Errorf("hfhub: %s: the hub did not say the file's commit and etag (X-Repo-Commit %q, ETag %q)", u, m.commit, m.etag)
	}
	return m, u, nil
}

func validETag(e string) bool {
	if len(e) < 8 || len(e) > 128 {
		return false
	}
	for _, r := range e {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '-') {
			return false
		}
	}
	return true
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i := range parts {
		parts[i] = url.PathEscape(parts[i])
	}
	return strings.Join(parts, "/")
}

// validFile rejects repository paths that would leave the snapshot folder.
func validFile(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.Contains(p, "\x00") {
		return fmt.Errorf("hfhub: bad file path %q", p)
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("hfhub: bad file path %q", p)
		}
	}
	return nil
}

// Download makes the file available in the cache and returns its
// snapshot path. A file already there (same commit, blob present) is not
// downloaded again. Offline, only the cache is consulted.
func (c *Client) Download(ctx context.Context, repo, revision, file string) (string, error) {
	if err := CheckRepo(repo); err != nil {
		return "", err
	}
	if err := validFile(file); err != nil {
		return "", err
	}
	dir := catalog.RepoDir(c.cache(), repo)
	if c.Offline {
		commit := revision
		if b, err := os.ReadFile(filepath.Join(dir, "refs", revision)); err == nil {
			commit = strings.TrimSpace(string(b))
		}
		p := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(file))
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s/%s", ErrOffline, repo, file)
		}
		return p, nil
	}
	return c.download(ctx, repo, revision, file, nil)
}

// download is Download, checking the hub's answer against the listing's
// entry for the file when there is one (Pull).
func (c *Client) download(ctx context.Context, repo, revision, file string, listed *RepoFile) (string, error) {
	dir := catalog.RepoDir(c.cache(), repo)
	m, resolveURL, err := c.head(ctx, repo, revision, file)
	if err != nil {
		return "", err
	}
	// Nothing counts that cannot be checked: a hub (or whoever answers
	// as one) that gives no size or no content hash could hand over any
	// bytes, of any length, as a model.
	if m.size <= 0 {
		return "", fmt.Errorf("hfhub: %s: the hub gave no size for the file: refusing a download that cannot be checked", resolveURL)
	}
	if len(m.etag) != 64 && len(m.etag) != 40 {
		return "", fmt.Errorf("hfhub: %s: the file's ETag %q is no SHA-256 (nor a git SHA-1): refusing a download that cannot be checked", resolveURL, m.etag)
	}
	if listed != nil && listed.SHA256 != "" && (!strings.EqualFold(listed.SHA256, m.etag) || listed.Size != m.size) {
		return "", fmt.Errorf("%w: %s: the listing says sha256 %s and %d bytes, the file's headers %s and %d", ErrChecksum, resolveURL, listed.SHA256, listed.Size, m.etag, m.size)
	}
	snap := filepath.Join(dir, "snapshots", m.commit, filepath.FromSlash(file))
	blob := filepath.Join(dir, "blobs", m.etag)
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		return "", err
	}
	if revision != m.commit {
		if err := writeRef(dir, revision, m.commit); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(blob); err != nil {
		src, token := resolveURL, true
		if m.location != "" {
			src, token = m.location, c.sameHost(m.location)
		}
		if err := c.fetch(ctx, src, token, blob, m, file); err != nil {
			return "", err
		}
	} else if c.Progress != nil {
		c.Progress(file, m.size, m.size)
	}
	if err := link(snap, blob); err != nil {
		return "", err
	}
	return snap, nil
}

// writeRef writes refs/NAME = commit atomically.
func writeRef(dir, name, commit string) error {
	if err := validFile(name); err != nil {
		return err
	}
	p := filepath.Join(dir, "refs", filepath.FromSlash(name))
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// link points the snapshot path at the blob with a relative symlink, as
// huggingface_hub does (so the cache can move).
func link(snap, blob string) error {
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(snap), blob)
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(snap); err == nil && cur == rel {
		return nil
	}
	tmp := snap + ".tmp-link"
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, snap)
}

// fetch downloads src into blob: bytes go to blob.incomplete, resumed
// with Range after a cut (also across runs), and the file is renamed to
// blob only once its hash matches the etag. A file with the wrong hash is
// removed.
func (c *Client) fetch(ctx context.Context, src string, token bool, blob string, m meta, file string) error {
	part := blob + ".incomplete"
	retries, wait := c.retries(), c.backoff()
	for attempt := 0; ; attempt++ {
		done, err := c.fetchOnce(ctx, src, token, part, m, file)
		if err == nil && done {
			break
		}
		if err == nil {
			err = errors.New("download ended early")
		}
		if errors.Is(err, ErrChecksum) {
			os.Remove(part) // these bytes are wrong: no resuming from them
		}
		if errors.Is(err, ErrChecksum) || ctx.Err() != nil || attempt >= retries {
			return fmt.Errorf("hfhub: %s: %w", file, err)
		}
		c.logf("%s: %v; resuming in %v", file, err, wait)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait *= 2
	}
	if err := verify(part, m.etag, m.size); err != nil {
		os.Remove(part)
		return fmt.Errorf("hfhub: %s: %w", file, err)
	}
	return os.Rename(part, blob)
}

// fetchOnce appends to part from its current length; done reports the
// file reached its size.
func (c *Client) fetchOnce(ctx context.Context, src string, token bool, part string, m meta, file string) (bool, error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	if m.size > 0 && have > m.size {
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		have, _ = f.Seek(0, io.SeekStart)
	}
	if m.size > 0 && have == m.size {
		return true, nil
	}
	hdr := http.Header{}
	if have > 0 {
		hdr.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return false, err
	}
	req.Header = hdr
	resp, err := c.send(req, token)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// What we have is all there is (or more): verify decides.
		return true, nil
	case have > 0 && resp.StatusCode == http.StatusOK:
		// The server ignored the range: start over.
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		have = 0
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
	case have > 0 && resp.StatusCode == http.StatusPartialContent:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			return false, fmt.Errorf("asked for bytes %d-, got %q", have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("GET: %s", resp.Status)
	}
	w := &progressWriter{w: f, file: file, done: have, total: m.size, report: c.Progress}
	// No more than the announced size is written (one byte more tells a
	// body that runs on).
	_, err = io.Copy(w, io.LimitReader(resp.Body, m.size-have+1))
	if w.done > m.size {
		return false, fmt.Errorf("%w: the body runs past the announced %d bytes", ErrChecksum, m.size)
	}
	if err != nil {
		return false, err
	}
	return w.done >= m.size, nil
}

type progressWriter struct {
	w           io.Writer
	file        string
	done, total int64
	report      func(string, int64, int64)
	last        time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.report != nil && (time.Since(p.last) > 100*time.Millisecond || p.done == p.total) {
		p.last = time.Now()
		p.report(p.file, p.done, p.total)
	}
	return n, err
}

// verify checks a finished download: its size, and its SHA-256 against a
// 64-digit etag (LFS files) or its git blob SHA-1 against a 40-digit one.
func verify(p, etag string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if size > 0 && fi.Size() != size {
		return fmt.Errorf("%w: %d bytes, expected %d", ErrChecksum, fi.Size(), size)
	}
	var h hash.Hash
	switch len(etag) {
	case 64:
		h = sha256.New()
	case 40:
		h = sha1.New()
		fmt.Fprintf(h, "blob %d\x00", fi.Size())
	default:
		return fmt.Errorf("%w: ETag %q is no hash", ErrChecksum, etag)
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, etag) {
		return fmt.Errorf("%w: got %s, expected %s", ErrChecksum, got, etag)
	}
	return nil
}

// do sends a request to the hub (with the token), retrying rate limits
// and server errors; a non-2xx/3xx answer is an error.
func (c *Client) do(ctx context.Context, method, u string, hdr http.Header) (*http.Response, error) {
	return c.doWith(ctx, method, u, hdr, c.sameHost(u))
}

// doWith is do, with the token only when token is set (and u is the
// hub's).
func (c *Client) doWith(ctx context.Context, method, u string, hdr http.Header, token bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if hdr != nil {
		req.Header = hdr
	}
	resp, err := c.send(req, token && c.sameHost(u))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %s %s", ErrNotFound, method, u)
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return nil, fmt.Errorf("hfhub: %s %s: %s (a gated or private repository needs HF_TOKEN)", method, u, resp.Status)
		}
		return nil, fmt.Errorf("hfhub: %s %s: %s", method, u, resp.Status)
	}
	return resp, nil
}

// send sends req, with the token when token is set, waiting out 429s
// (for as long as the RateLimit or Retry-After header says, else a
// doubling backoff) and retrying 5xx answers and network errors.
func (c *Client) send(req *http.Request, token bool) (*http.Response, error) {
	req.Header.Set("User-Agent", "strata")
	if token && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	} else {
		req.Header.Del("Authorization")
	}
	wait := c.backoff()
	for attempt := 0; ; attempt++ {
		resp, err := c.http().Do(req)
		if err == nil && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
			return resp, nil
		}
		if attempt >= c.retries() || req.Context().Err() != nil {
			if err != nil {
				return nil, err
			}
			return resp, nil
		}
		d := wait
		why := ""
		if err != nil {
			why = err.Error()
		} else {
			why = resp.Status
			if s := rateLimitWait(resp.Header); s > 0 {
				d = s
			}
			resp.Body.Close()
		}
		c.logf("%s %s: %s; trying again in %v", req.Method, req.URL.Redacted(), why, d)
		if err := sleep(req.Context(), d); err != nil {
			return nil, err
		}
		wait *= 2
	}
}

// rateLimitWait reads how long the hub asks a client to wait: the t=
// (seconds to reset) of the IETF RateLimit header the hub sends, else
// Retry-After in seconds. Capped at 10 minutes.
func rateLimitWait(h http.Header) time.Duration {
	secs := -1
	for _, p := range strings.Split(h.Get("RateLimit"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "t="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				secs = n
			}
		}
	}
	if secs < 0 {
		if n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil {
			secs = n
		}
	}
	if secs < 0 {
		return 0
	}
	return min(time.Duration(secs)*time.Second+100*time.Millisecond, 10*time.Minute)
}

func (c *Client) retries() int {
	if c.Retries <= 0 {
		return 5
	}
	return c.Retries
}

func (c *Client) backoff() time.Duration {
	if c.Backoff <= 0 {
		return time.Second
	}
	return c.Backoff
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
