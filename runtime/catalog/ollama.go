package catalog

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ollamaModelLayer is the media type of the layer of an Ollama manifest
// that holds the GGUF weights.
const ollamaModelLayer = "application/vnd.ollama.image.model"

// ollamaDefault is the registry and namespace Ollama leaves out of names.
const ollamaDefault = "registry.ollama.ai/library/"

// scanOllama lists Ollama's models: every manifest under
// manifests/HOST/NAMESPACE/MODEL/TAG names a blob (blobs/sha256-HEX)
// as its model layer. Models are named MODEL:TAG for the default registry
// and namespace, NAMESPACE-MODEL:TAG otherwise (no "/": a name never is a path).
func scanOllama(root string) []Model {
	manifests := filepath.Join(root, "manifests")
	var out []Model
	filepath.WalkDir(manifests, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(manifests, p)
		if err != nil {
			return nil
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) > 1<<20 {
			return nil
		}
		var man struct {
			Layers []struct {
				MediaType string `json:"mediaType"`
				Digest    string `json:"digest"`
			} `json:"layers"`
		}
		if json.Unmarshal(b, &man) != nil {
			return nil
		}
		for _, l := range man.Layers {
			hex, ok := strings.CutPrefix(l.Digest, "sha256:")
			if l.MediaType != ollamaModelLayer || !ok || len(hex) != 64 || strings.ContainsAny(hex, `/\.`) {
				continue
			}
			blob := filepath.Join(root, "blobs", "sha256-"+hex)
			fi, err := os.Stat(blob)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			full := strings.Join(parts[:3], "/") + ":" + parts[3]
			name := strings.TrimPrefix(full, ollamaDefault)
			if name == full {
				name = parts[1] + "-" + parts[2] + ":" + parts[3]
			}
			out = append(out, Model{
				Name: name, Source: SourceOllama, Where: full, Paths: []string{blob}, Parts: 1,
				Size: fi.Size(), Complete: true, ReadOnly: true, ModTime: fi.ModTime(),
			})
			break
		}
		return nil
	})
	return out
}
