package peers

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// IdentityFile is the name of the node's private key in a data directory.
const IdentityFile = "identity.key"

// LoadOrCreateIdentity reads the node's Ed25519 private key from
// dataDir/identity.key (libp2p's protobuf key encoding), creating the key
// and the directory (mode 0700, key 0600) on first use. The peer ID, and so
// every PID on the node, stays the same across restarts.
func LoadOrCreateIdentity(dataDir string) (crypto.PrivKey, error) {
	path := filepath.Join(dataDir, IdentityFile)
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := crypto.UnmarshalPrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	b, err = crypto.MarshalPrivateKey(k)
	if err != nil {
		return nil, err
	}
	if err := writeFileExcl(path, b); err != nil {
		if errors.Is(err, os.ErrExist) { // another process made it first
			return LoadOrCreateIdentity(dataDir)
		}
		return nil, err
	}
	return k, nil
}

// LoadOrCreateIdentityID returns the peer ID of the identity in dataDir,
// creating the identity on first use (as New does).
func LoadOrCreateIdentityID(dataDir string) (peer.ID, error) {
	k, err := LoadOrCreateIdentity(dataDir)
	if err != nil {
		return "", err
	}
	return peer.IDFromPrivateKey(k)
}
