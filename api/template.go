package api

import (
	"log/slog"
	"sync"

	"strata/runtime/chattemplate"
)

// The chat as the model's template renders it lives beside the template
// engine (package chattemplate); the surfaces speak of it by these names.
type (
	Message     = chattemplate.Message
	MessageCall = chattemplate.MessageCall
	ChatPrompt  = chattemplate.ChatPrompt
)

// warnedTemplates remembers the templates a fallback was logged for, so
// a broken template warns once, not on every request.
var warnedTemplates sync.Map // chattemplate.Key -> struct{}

func warnFallback(log *slog.Logger, model, src string, err error) {
	if log == nil {
		return
	}
	key := chattemplate.Key(src)
	if _, seen := warnedTemplates.LoadOrStore(key, struct{}{}); seen {
		return
	}
	log.Warn("the model's chat template cannot be used; prompts are plain transcripts", "model", model, "template", key, "err", err)
}
