// Package origin is a node's origin side: an Origin plans each session
// it takes onto the cluster's members (actors/plan), has their stage
// hosts load the shards, and drives generation through the ring of
// stages with the session core of actors/session, replaying after a
// lost node. The generation loop is engine.Loop, shared with the
// one-node engine.
//
// Files: origin.go (the Origin: planning and loading), options.go (its
// Options), member.go (the members it plans over), ring.go (one
// session's ring: the core's shell), prefixcache.go (which retained KV
// caches hold which tokens, for prompt caching), constrain.go (a
// session's schema, sent to its last stage). The stages are
// strata/actors/stage; the two meet only in strata/messages.
package origin
