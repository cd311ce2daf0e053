package engine

import (
	"context"
	"encoding/json"
	"testing"

	"strata/runtime/grammar"
)

// A Request's Schema constrains one node's output as it does a cluster's
// last stage: a JSON document of the schema, within the token budget.
func TestSchemaConstrainsOutput(t *testing.T) {
	e := openStories(t)
	sc, err := grammar.Compile([]byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Generate(context.Background(), Request{Prompt: "Lily", MaxTokens: 40, Schema: sc}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal([]byte(res.Text), &doc); err != nil || doc.Name == nil {
		t.Errorf("%q (%s): not a document of the schema: %v", res.Text, res.FinishReason, err)
	}
}
