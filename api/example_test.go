package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"

	"strata/api"
	"strata/internal/testdata"
	"strata/runtime/engine"
)

// One machine without a cluster serves the engine directly: Local is the
// Generator, the Models and a one-node cluster status. (A node serves its
// origin instead, with NewFileModels over its models: cmd/strata/node.go.)
// Any OpenAI, Anthropic or Ollama client can then talk to it; here a
// plain HTTP request to the chat endpoint.
func ExampleNewServer() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := engine.Open(filepath.Join(dir, "gguf", "stories260K.gguf"), engine.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	local, err := api.NewLocal(e, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	// A non-loopback Addr needs an APIKey (ErrAPIKeyRequired); extra
	// endpoints (srv.Handle) sit behind the same key and guards.
	srv, err := api.NewServer(api.Config{Generator: local, Models: local})
	if err != nil {
		fmt.Println(err)
		return
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	body := `{"model": "stories260K", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 12, "temperature": 0}`
	res, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var answer struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage api.Usage
	}
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, answer.Choices[0].FinishReason, answer.Usage.CompletionTokens, "tokens")
	fmt.Printf("%q\n", answer.Choices[0].Message.Content)
	// Output:
	// 200 OK length 12 tokens
	// " This story is to be a g"
}
