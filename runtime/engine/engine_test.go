package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/sample"
)

// storiesGreedy: SOURCES.md's 256 greedy ids of stories260K after BOS.
const storiesGreedy = `403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267 337 335 312 432 398 312 286 267 414 270 333 415 426 13 438 310 439 419 357 336 432 313 438 310 432 278 316 439 419 298 414 267 265 282 295 433 426 436 317 286 296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 391 267 337 335 364 420 268 388 432 398 359 280 303 439 413 272 417 264 312 426 436 13 438 310 286 296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 439 423 262 304 420 422 432 317 426 359 279 292 416 439 413 409 416 327 263 415 294 267 400 426 436 13 438 310 279 292 416 439 413 391 267 281 421 427 311 357 432 384 358 336 432 313 442 439 423 262 304 420 422 432 357 426 359 279 292 416 439 413 409 416 327 263 415 294 267 400 426 436 320 285 357 336 432 313 455 289 439 413 263 304 420 422 432 317 426 410 448 411 280 303 281 421 427 364 426`

// llama2cStory decodes the greedy ids with llama2.c's own tokenizer file
// (tok512.bin) and run.c's rules — an oracle independent of our tokenizer:
// the text llama2.c prints for stories260K from an empty prompt.
func llama2cStory(t testing.TB) string {
	b, err := os.ReadFile(testdata.Path(t, "llama2c/tok512.bin"))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	off := 4 // max_token_length
	vocab := make([]string, 512)
	for i := range vocab {
		_ = math.Float32frombits(le.Uint32(b[off:])) // score
		n := int(le.Uint32(b[off+4:]))
		vocab[i] = string(b[off+8 : off+8+n])
		off += 8 + n
	}
	var sb strings.Builder
	prev := 1 // BOS
	for _, f := range strings.Fields(storiesGreedy) {
		id, _ := strconv.Atoi(f)
		piece := vocab[id]
		if prev == 1 && strings.HasPrefix(piece, " ") {
			piece = piece[1:]
		}
		var byt int
		if n, _ := fmtSscan(piece, &byt); n {
			piece = string([]byte{byte(byt)})
		}
		sb.WriteString(piece)
		prev = id
	}
	return sb.String()
}

// fmtSscan parses run.c's raw byte tokens "<0xXX>".
func fmtSscan(piece string, v *int) (bool, error) {
	if len(piece) == 6 && strings.HasPrefix(piece, "<0x") && piece[5] == '>' {
		n, err := strconv.ParseUint(piece[3:5], 16, 8)
		*v = int(n)
		return err == nil, err
	}
	return false, nil
}

func openStories(t testing.TB) *Engine {
	e, err := Open(testdata.Path(t, "gguf/stories260K.gguf"), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestEmptyPromptTellsTheStory(t *testing.T) {
	e := openStories(t)
	var streamed strings.Builder
	res, err := e.Generate(context.Background(), Request{MaxTokens: 256}, func(tok Token) error {
		streamed.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := llama2cStory(t)
	if !strings.HasPrefix(want, "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.") {
		t.Fatalf("oracle broken: %q", want[:80])
	}
	if res.Text != want || streamed.String() != want {
		t.Errorf("story differs from llama2.c's:\n got %q\nwant %q", res.Text, want)
	}
	if res.FinishReason != FinishLength || len(res.Tokens) != 256 || res.PromptTokens != 1 {
		t.Errorf("finish %q, %d tokens, %d prompt tokens", res.FinishReason, len(res.Tokens), res.PromptTokens)
	}
}

func TestPromptContinues(t *testing.T) {
	e := openStories(t)
	res, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time, there was a little girl named Lily.", MaxTokens: 40}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	// The model continues its own story: the greedy text goes on as in the
	// BOS-only run once the prompt matches it.
	if !strings.HasPrefix(res.Text, " She loved to play outside in the park.") {
		t.Errorf("continuation %q", res.Text)
	}
}

func TestStopStringsAndSampling(t *testing.T) {
	e := openStories(t)
	res, err := e.Generate(context.Background(), Request{MaxTokens: 100, Stop: []string{"Lily"}}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Once upon a time, there was a little girl named " || res.FinishReason != FinishStop {
		t.Errorf("stop: %q %q", res.Text, res.FinishReason)
	}
	p := sample.Params{Temperature: 0.8, TopP: 0.9, Seed: 42}
	a, _ := e.Generate(context.Background(), Request{MaxTokens: 50, Sampling: p}, func(Token) error { return nil })
	b, _ := e.Generate(context.Background(), Request{MaxTokens: 50, Sampling: p}, func(Token) error { return nil })
	if a.Text != b.Text || len(a.Tokens) == 0 {
		t.Errorf("same seed, different text:\n%q\n%q", a.Text, b.Text)
	}
	if _, err := e.Generate(context.Background(), Request{Sampling: sample.Params{Temperature: -1}}, nil); err == nil {
		t.Error("invalid sampling accepted")
	}
}

func TestCancel(t *testing.T) {
	e := openStories(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := e.Generate(ctx, Request{MaxTokens: 500}, func(Token) error {
		n++
		if n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(res.Tokens) != 10 {
		t.Errorf("err %v after %d tokens", err, len(res.Tokens))
	}
}

func TestTinyRandomGenerates(t *testing.T) {
	e, err := Open(testdata.Path(t, "gguf/llama-2-tiny-random.gguf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), Request{Prompt: "Hello world", MaxTokens: 16}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) == 0 || res.PromptTokens != 3 {
		t.Errorf("%d tokens from %d prompt tokens", len(res.Tokens), res.PromptTokens)
	}
}
