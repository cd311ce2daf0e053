package actors

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// NewSystem returns an actor system that logs through logger at warning
// level and above (protoactor's own info lines are noise to strata users).
// A nil logger discards everything.
func NewSystem(logger *slog.Logger) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		if logger == nil {
			return slog.New(slog.DiscardHandler)
		}
		return slog.New(levelFilter{logger.Handler(), slog.LevelWarn})
	}))
}

// levelFilter drops records below a level.
type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}
