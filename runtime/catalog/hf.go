package catalog

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// RepoDir is the cache folder of a model repository ("ORG/NAME"), as
// huggingface_hub names it: models--ORG--NAME.
func RepoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// scanHF lists the GGUF models in the snapshots of every model repository
// of a Hugging Face cache. The revision refs/main names comes first, so
// its files win over older snapshots of the same name.
func scanHF(cache string) []Model {
	repos, err := os.ReadDir(cache)
	if err != nil {
		return nil
	}
	var out []Model
	for _, r := range repos {
		if !r.IsDir() || !strings.HasPrefix(r.Name(), "models--") {
			continue
		}
		repo := strings.ReplaceAll(strings.TrimPrefix(r.Name(), "models--"), "--", "/")
		dir := filepath.Join(cache, r.Name())
		seen := map[string]bool{}
		for _, rev := range revisions(dir) {
			ms, err := scanDir(filepath.Join(dir, "snapshots", rev), true)
			if err != nil {
				continue
			}
			for _, m := range ms {
				if seen[m.Name] {
					continue
				}
				seen[m.Name] = true
				m.Source, m.Where = SourceHuggingFace, repo+"@"+rev[:min(len(rev), 12)]
				out = append(out, m)
			}
		}
	}
	return out
}

// revisions returns a repository's snapshot folders, the one refs/main
// points to first, then the others by name.
func revisions(repoDir string) []string {
	entries, err := os.ReadDir(filepath.Join(repoDir, "snapshots"))
	if err != nil {
		return nil
	}
	main := ""
	if b, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err == nil {
		main = strings.TrimSpace(string(b))
	}
	var revs []string
	for _, e := range entries {
		if e.IsDir() {
			revs = append(revs, e.Name())
		}
	}
	sort.SliceStable(revs, func(i, j int) bool {
		if (revs[i] == main) != (revs[j] == main) {
			return revs[i] == main
		}
		return revs[i] < revs[j]
	})
	return revs
}

// removeHF deletes a model's snapshot links, the blobs no other link of
// the repository still uses, and the repository folder once no snapshot
// holds a file.
func removeHF(cache string, m Model) error {
	repo, _, _ := strings.Cut(m.Where, "@")
	dir := RepoDir(cache, repo)
	var blobs []string
	for _, p := range m.Paths {
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p {
			blobs = append(blobs, t)
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	used := map[string]bool{}
	files := 0
	filepath.WalkDir(filepath.Join(dir, "snapshots"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
			if t, err := filepath.EvalSymlinks(p); err == nil {
				used[t] = true
			}
		}
		return nil
	})
	for _, b := range blobs {
		if !used[b] && strings.HasPrefix(b, filepath.Join(dir, "blobs")+string(filepath.Separator)) {
			if err := os.Remove(b); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	if files == 0 {
		return os.RemoveAll(dir)
	}
	return nil
}
