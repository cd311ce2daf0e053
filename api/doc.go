// Package api will hold the OpenAI-compatible HTTP API, the cluster status
// API, metrics and the embedded dashboard. Nothing is implemented yet: it
// arrives with the API issue.
package api
