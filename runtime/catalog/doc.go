// Package catalog knows which models this machine has and what they are
// called. It looks in the directories given with --models, in the
// Hugging Face hub cache (where strata pull writes), and read-only in the
// stores other tools keep: Ollama and LM Studio.
//
// A model's name is its GGUF file name without ".gguf"; a split model
// (NAME-00001-of-00005.gguf ...) is one model called NAME; an Ollama model
// is called MODEL:TAG as ollama names it. The first store that has a name
// wins, in the order: --models dirs, the Hugging Face cache, LM Studio,
// Ollama.
//
// FromEnv finds those stores; List gives every complete model, Path the
// file a model's name stands for (ExampleCatalog).
package catalog
