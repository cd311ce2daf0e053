package peers

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/libp2p/go-libp2p/core/pnet"
)

// MinSecretBytes is the shortest cluster secret accepted. The mDNS service
// name is derived from the secret and broadcast on the LAN, so a short
// secret could be guessed offline; strata's own secrets are 32 random bytes.
const MinSecretBytes = 16

// SecretFile is the name of the cluster secret in a data directory.
const SecretFile = "secret"

// ErrShortSecret is returned for a cluster secret under MinSecretBytes.
var ErrShortSecret = errors.New("peers: cluster secret too short (at least 16 characters; strata node creates a random one)")

// kdfSalt separates strata's derivations from any other use of the secret.
var kdfSalt = []byte("strata cluster secret v1")

// derive expands the cluster secret with HKDF-SHA256 (RFC 5869) under a
// label, so the network key and the public mDNS name are independent: the
// name reveals nothing about the key.
func derive(secret []byte, label string, n int) []byte {
	k, err := hkdf.Key(sha256.New, secret, kdfSalt, label, n)
	if err != nil {
		panic("peers: hkdf: " + err.Error()) // only for n > 255*32
	}
	return k
}

// NetworkKey derives the libp2p private-network key (a 32-byte pre-shared
// key) from the cluster secret with HKDF-SHA256. Nodes whose secrets differ
// fail the private-network handshake and cannot connect at all.
func NetworkKey(secret []byte) (pnet.PSK, error) {
	if err := checkSecret(secret); err != nil {
		return nil, err
	}
	return pnet.PSK(derive(secret, "strata/pnet/v1 private network key", 32)), nil
}

// ServiceName is the mDNS service a node announces: clusters with different
// secrets announce (and so discover) different names.
func ServiceName(secret []byte) string {
	if len(secret) == 0 {
		return "_strata._udp"
	}
	return "_strata-" + hex.EncodeToString(derive(secret, "strata/mdns/v1 service name", 6)) + "._udp"
}

func checkSecret(secret []byte) error {
	if len(secret) < MinSecretBytes {
		return ErrShortSecret
	}
	return nil
}

// NewSecret returns a fresh random cluster secret: 32 random bytes in hex.
func NewSecret() []byte {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return []byte(hex.EncodeToString(b[:]))
}

// ReadSecretFile reads a cluster secret: the file's text without
// surrounding white space.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := []byte(strings.TrimSpace(string(b)))
	if err := checkSecret(s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// LoadOrCreateSecret reads dataDir/secret, or creates it (mode 0600) with a
// new random secret when it does not exist; created says which.
func LoadOrCreateSecret(dataDir string) (secret []byte, created bool, err error) {
	path := filepath.Join(dataDir, SecretFile)
	s, err := ReadSecretFile(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return s, false, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, err
	}
	s = NewSecret()
	if err := writeFileExcl(path, append(s, '\n')); err != nil {
		if errors.Is(err, os.ErrExist) { // another process made it first
			s, err = ReadSecretFile(path)
			return s, false, err
		}
		return nil, false, err
	}
	return s, true, nil
}

// writeFileExcl creates path with mode 0600 holding data, failing with
// os.ErrExist if it exists. The bytes go to a temporary file first, are
// synced, and the file is then linked into place, so a crash or a second
// process never sees path empty or half written; the directory is synced
// so the new name survives a power cut.
func writeFileExcl(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// A hard link fails if path exists, where a rename would replace it
	// (and a second process starting at the same moment would overwrite
	// the key the first one already uses).
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return err
		}
		// No hard links here (some network or FUSE file systems): a
		// rename, after checking nothing is there.
		if _, serr := os.Lstat(path); serr == nil {
			return &os.PathError{Op: "create", Path: path, Err: os.ErrExist}
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	syncDir(dir)
	return nil
}

// syncDir makes a new directory entry durable (best effort: not every
// system can sync a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// LooseFileMode says whether a key or secret file can be read or written
// by users other than its owner (mode bits beyond 0600/0700), and
// describes it; it reports nothing where modes mean little (Windows).
func LooseFileMode(path string) (string, bool) {
	if runtime.GOOS == "windows" {
		return "", false
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o077 == 0 {
		return "", false
	}
	return fmt.Sprintf("%s has mode %04o: other users of this machine can read it; run chmod 600 %s", path, st.Mode().Perm(), path), true
}
