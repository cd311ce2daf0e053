package catalog_test

import (
	"fmt"
	"path/filepath"

	"strata/internal/testdata"
	"strata/runtime/catalog"
)

// A catalogue over a models directory (FromEnv adds the Hugging Face
// cache, LM Studio's and Ollama's stores): every complete model under the
// name the cluster and the API use, and the path of its (first) GGUF part.
func ExampleCatalog() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	c := catalog.Catalog{Dirs: []string{filepath.Join(dir, "gguf")}}
	models, err := c.List()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range models {
		if m.Name == "stories260K" {
			fmt.Println(m.Name, m.Source, len(m.Paths), "file")
		}
	}
	path, err := c.Path("stories260K")
	fmt.Println(filepath.Base(path), err)
	_, err = c.Path("no-such-model")
	fmt.Println(err != nil)
	// Output:
	// stories260K models 1 file
	// stories260K.gguf <nil>
	// true
}
