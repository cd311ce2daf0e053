package gguf

import (
	"errors"
	"fmt"
)

// Sentinel errors, wrapped by *FormatError; test with errors.Is.
var (
	ErrNotGGUF            = errors.New("gguf: not a GGUF file")
	ErrUnsupportedVersion = errors.New("gguf: unsupported GGUF version")
	ErrTruncated          = errors.New("gguf: file is truncated")
	ErrInvalid            = errors.New("gguf: invalid value")
	ErrUnknownTensor      = errors.New("gguf: no such tensor")
)

// FormatError describes what is wrong with a file, and where.
type FormatError struct {
	File   string // path or name given to Open/Parse
	Field  string // what was being read, e.g. `tensor "blk.0.attn_q.weight" offset`
	Offset int64  // byte offset in the file where the field starts
	Err    error  // one of the sentinel errors above
	Detail string // what was found and what was expected
}

func (e *FormatError) Error() string {
	msg := fmt.Sprintf("%s: %s at byte %d", e.File, e.Field, e.Offset)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return fmt.Sprintf("%v (%s)", e.Err, msg)
}

func (e *FormatError) Unwrap() error { return e.Err }
