// Package peers will hold the libp2p host, identity, private-network key,
// discovery, membership gossip and the remote-actor bridge. Nothing is
// implemented yet: it arrives with the peers issue.
package peers
