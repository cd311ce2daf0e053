package catalog

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// splitPart matches a llama.cpp split part's file name: NAME-00001-of-00005.gguf.
var splitPart = regexp.MustCompile(`^(.+)-(\d{5})-of-(\d{5})\.gguf$`)

// Name is a model's name given the path of one of its GGUF files: the file
// name without .gguf and, for a split part, without -0000N-of-0000M.
func Name(path string) string {
	base := filepath.Base(path)
	if m := splitPart.FindStringSubmatch(base); m != nil {
		return m[1]
	}
	if len(base) > 5 && strings.EqualFold(base[len(base)-5:], ".gguf") {
		return base[:len(base)-5]
	}
	return base
}

// Split says whether path names part n (1-based) of count of a split
// model; ok is false for a plain file name.
func Split(path string) (n, count int, ok bool) {
	m := splitPart.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return 0, 0, false
	}
	n, _ = strconv.Atoi(m[2])
	count, _ = strconv.Atoi(m[3])
	if n < 1 || count < 1 || n > count {
		return 0, 0, false
	}
	return n, count, true
}

// PartName is the file name of part n (1-based) of count of the split
// model NAME, as llama.cpp's gguf-split names them.
func PartName(name string, n, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", name, n, count)
}

// ValidName reports whether name can name a model: not empty, at most
// 512 bytes, no path separators, not "." or "..", and no glob characters
// (*?[]) or control characters: names come from clients, and a name that
// matches files by pattern could reach files no model list shows.
func ValidName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\\*?[]") || strings.ContainsFunc(name, unicode.IsControl) ||
		name == "." || name == ".." || len(name) > 512 {
		// At most 64 characters of it in the error: the error goes back to
		// whoever sent the name, and an 8 MiB name quoted whole cost a
		// node seconds and sent 8 MiB back (a peer's LoadShard).
		return fmt.Errorf("invalid model name %.64q (%d bytes)", name, len(name))
	}
	return nil
}
