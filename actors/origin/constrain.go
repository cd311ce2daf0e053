package origin

import (
	"strata/messages"
)

// Structured output on a cluster: the sampler runs on the last stage, so
// the JSON schema travels there in Sampling (as text: a peer's schema is
// untrusted input, compiled here under grammar's limits and a size cap),
// and the last stage masks every sampled token with the grammar. The
// origin sees the tokens as usual.

// constrain puts the session's schema, if any, into the Sampling of its
// first Forward. The document starts after the prompt; its token budget
// is MaxTokens or what the context leaves, whichever is less.
func (r *ring) constrain(p *messages.Sampling) {
	if r.req.Schema == nil {
		return
	}
	budget := r.ctxLen - r.info.Prompt
	if r.req.MaxTokens > 0 {
		budget = min(budget, r.req.MaxTokens)
	}
	p.Constrained, p.JsonSchema = true, string(r.req.Schema.Source())
	p.SchemaFrom, p.SchemaBudget = uint32(r.info.Prompt), uint32(max(budget, 0))
}

// ConstrainsRemotely marks Origin as a generator that honours
// Request.Schema (the api package asks for it before it sends a schema).
func (c *Origin) ConstrainsRemotely() {}
