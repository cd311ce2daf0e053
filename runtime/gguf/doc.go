// Package gguf reads and writes GGUF files, the model format of llama.cpp.
//
// A File is memory-mapped: tensor data is returned as zero-copy views into
// the mapping, valid until Close. Metadata is copied out and outlives the
// File. Split models (NAME-00001-of-00003.gguf) open as one File.
//
// Files are untrusted input: every count, length, offset and size is
// checked against the bytes actually present before it is used, and a
// malformed file yields a *FormatError naming the file, the field and the
// byte offset — never a panic and never an allocation sized by a lying
// length field.
//
// The package example opens a model and reads it.
package gguf
