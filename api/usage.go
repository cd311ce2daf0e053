package api

// Usage counts tokens as OpenAI does.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
	// CompletionTokensDetails, with speculative decoding: the guessed
	// tokens the model accepted and those it rejected (OpenAI's fields
	// of the same names, from its predicted outputs).
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// CompletionTokensDetails breaks completion_tokens down by speculation.
type CompletionTokensDetails struct {
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
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
