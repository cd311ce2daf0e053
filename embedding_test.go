package strata_test

import (
	"os"
	"strings"
	"testing"
)

// The embedding guide's code is the Example's code, word for word.
func TestEmbeddingDocIsTheExample(t *testing.T) {
	doc, err := os.ReadFile("docs/embedding.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(code)+"```\n") {
		t.Error("docs/embedding.md does not hold example_test.go in a go code block; copy it over")
	}
}
