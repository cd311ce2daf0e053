package model

// StoriesIDs exports storiesIDs (llama2.c's published greedy sample) to
// the external tests.
var StoriesIDs = storiesIDs
