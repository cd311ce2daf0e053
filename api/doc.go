// Package api is the HTTP face of a strata node: the OpenAI-compatible
// API, the cluster and stats APIs, Prometheus metrics and the embedded web
// dashboard. One Server serves them all:
//
//	POST /v1/chat/completions  chat, rendered with the model's GGUF chat template (SSE with "stream": true)
//	POST /v1/completions       plain continuation of a prompt (SSE with "stream": true)
//	POST /v1/responses         OpenAI Responses API, text and function calls (named SSE events with "stream": true)
//	POST /v1/messages          Anthropic Messages API (named SSE events with "stream": true)
//	GET  /v1/models            the models this node can serve, readable by OpenAI's and Anthropic's clients; GET /v1/models/{id} one of them
//	POST /api/chat             Ollama's chat (NDJSON stream unless "stream": false)
//	POST /api/generate         Ollama's generate (template applied unless "raw"; "context" continues an answer)
//	GET  /api/tags             Ollama's model list; POST /api/show, GET /api/ps, GET /api/version likewise
//	POST /api/strata/generate  strata's own NDJSON stream with token ids and timings (strata run --api)
//	GET  /api/cluster          members, memory, the layers each holds, active sessions
//	GET  /api/stats            live tokens/s, queue and per-peer link figures (the dashboard polls it)
//	GET  /metrics              Prometheus text format
//	GET  /                     the dashboard (static files; it asks for the API key when one is set)
//
// A node builds the server over its origin (cmd/strata/node.go):
// NewFileModels describes the models the cluster can run, the origin is
// the Generator, and the node's status and peers are extra endpoints
// (Server.Handle) behind the same API key. A single machine serves the
// engine directly through Local (ExampleNewServer). NewServer refuses a
// non-loopback Addr without an APIKey (ErrAPIKeyRequired).
//
// Structured output (response_format json_schema, forced tools, Ollama's
// format) constrains sampling with a grammar compiled from the JSON
// schema (package grammar); it needs a ConstrainedGenerator (Local: the
// engine takes the matcher) or a RemoteConstrainedGenerator (a cluster:
// the schema travels to the last stage, which samples), and other
// generators refuse it with 400. Tools the model may call (tool_choice
// auto) go through its chat template, and package toolcall parses the
// calls out of its answer in its family's syntax (tools.go); any
// Generator serves those.
//
// Prompt caching: a request whose prompt begins with what an earlier one
// left in the KV cache (a conversation's next turn) reuses it, on one
// node or on every stage of a ring; usage reports the cached tokens
// (OpenAI prompt_tokens_details.cached_tokens, Anthropic
// cache_read_input_tokens, Responses input_tokens_details.cached_tokens)
// and strata_prompt_cached_tokens_total counts them.
//
// Requests are validated before they queue: malformed JSON and bad
// parameters get 400, an unknown model 404, a missing or wrong key 401, a
// body over Config.MaxBodyBytes 413, a prompt that leaves no room in the
// context 400 (code context_length_exceeded), all in OpenAI's error shape
// {"error": {"message", "type", "param", "code"}}. At most
// Config.MaxActive generations run at once; up to Config.MaxQueue more
// wait first come first served, and beyond that a request gets 429 at
// once. Every generation runs under its request's context, so a client
// that disconnects cancels it.
//
// Metrics records what the server does (requests, tokens, time to first
// token, tokens/s, queue depth) and offers the cluster hooks for what only
// it sees: ObserveHop and ObserveStep (per-hop and per-ring-step latency)
// and AddBytesSent (bytes per peer). Packages below api declare a small
// interface with those methods; *Metrics satisfies it.
package api
