package hfhub

import (
	"context"
	"fmt"
	"strings"
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
		p, err := c.Download(ctx, repo, "main", f.Path)
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
