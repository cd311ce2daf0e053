package api

// Usage counts tokens as OpenAI does.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks prompt_tokens down: cached_tokens are those
// whose KV cache an earlier request left (prompt caching), so that
// prefill did not run them.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// cached is the number of prompt tokens read from the prompt cache.
func (u Usage) cached() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}
