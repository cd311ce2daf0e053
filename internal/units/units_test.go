package units

import "testing"

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"512GB": 512e9, "96GiB": 96 << 30, "96g": 96 << 30, "1.5TB": 1.5e12, "1048576": 1 << 20, " 2 MB ": 2e6, "0": 0, "7b": 7,
	} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GB", "-1GB", "1e400", "12XB", "nan"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
	if s := Bytes(142e9); s != "142.0 GB" {
		t.Errorf("Bytes: %s", s)
	}
}
