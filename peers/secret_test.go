package peers

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestNetworkKey(t *testing.T) {
	s1, s2 := NewSecret(), NewSecret()
	if bytes.Equal(s1, s2) || len(s1) != 64 {
		t.Fatalf("secrets %q %q", s1, s2)
	}
	k1, err := NetworkKey(s1)
	if err != nil {
		t.Fatal(err)
	}
	k1b, _ := NetworkKey(s1)
	k2, _ := NetworkKey(s2)
	if len(k1) != 32 || !bytes.Equal(k1, k1b) || bytes.Equal(k1, k2) || bytes.Contains(s1, k1) {
		t.Fatalf("keys %x %x %x", k1, k1b, k2)
	}
	if ServiceName(s1) == ServiceName(s2) || strings.Contains(ServiceName(s1), string(s1[:12])) {
		t.Fatalf("service names %s %s", ServiceName(s1), ServiceName(s2))
	}
	if _, err := NetworkKey([]byte("short")); !errors.Is(err, ErrShortSecret) {
		t.Fatalf("short secret: %v", err)
	}
}

func TestSecretAndIdentityFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, created, err := LoadOrCreateSecret(dir)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	s2, created, err := LoadOrCreateSecret(dir)
	if err != nil || created || !bytes.Equal(s, s2) {
		t.Fatalf("reload: %q %v %v", s2, created, err)
	}
	k1, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateIdentity(dir)
	if err != nil || !k1.Equals(k2) {
		t.Fatalf("identity not persistent: %v", err)
	}
	for _, name := range []string{SecretFile, IdentityFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v", name, fi.Mode(), err)
		}
	}
	if _, err := ReadSecretFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := ReadSecretFile(short); !errors.Is(err, ErrShortSecret) {
		t.Errorf("short file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, IdentityFile), []byte("garbage"), 0o600)
	if _, err := LoadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), IdentityFile) {
		t.Errorf("garbage identity: %v", err)
	}
}

// Nodes starting at once on one data directory must all get the same
// complete key and secret: nobody may read a file another is still
// writing, nor replace one another already uses.
func TestCreateFilesConcurrently(t *testing.T) {
	for round := range 40 {
		dir := t.TempDir()
		const n = 4
		keys := make([][]byte, n)
		secrets := make([][]byte, n)
		errs := make(chan error, 2*n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				k, err := LoadOrCreateIdentity(dir)
				if err != nil {
					errs <- err
					return
				}
				keys[i], _ = k.Raw()
				s, _, err := LoadOrCreateSecret(dir)
				if err != nil {
					errs <- err
					return
				}
				secrets[i] = s
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range n {
			if !bytes.Equal(keys[i], keys[0]) || !bytes.Equal(secrets[i], secrets[0]) {
				t.Fatalf("round %d: two processes got different keys or secrets", round)
			}
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("round %d: data directory holds %v, want the key and the secret only", round, names)
		}
	}
}

func TestLooseFileMode(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadOrCreateSecret(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SecretFile)
	if msg, loose := LooseFileMode(path); loose {
		t.Fatalf("a new secret is loose: %s", msg)
	}
	os.Chmod(path, 0o640)
	if msg, loose := LooseFileMode(path); !loose || !strings.Contains(msg, "mode 0640") {
		t.Fatalf("mode 0640: %q %v", msg, loose)
	}
}
