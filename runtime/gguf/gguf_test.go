package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/tensor"
)

// allGGUF lists every .gguf file under the shared test data.
func allGGUF(t testing.TB) []string {
	t.Helper()
	dir, err := testdata.Dir()
	if err != nil {
		t.Fatalf("%v", err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".gguf") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 11 {
		t.Fatalf("found %d .gguf files under %s, expected at least 11", len(files), dir)
	}
	return files
}

func TestOpenEveryTestFile(t *testing.T) {
	for _, p := range allGGUF(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version() != 3 {
				t.Errorf("version %d, want 3", f.Version())
			}
			if f.Metadata().Architecture() == "" {
				t.Error("no general.architecture")
			}
			if _, ok := f.Metadata().Strings("tokenizer.ggml.tokens"); !ok {
				t.Error("no tokenizer.ggml.tokens")
			}
			for _, tn := range f.Tensors() {
				if got := len(f.Data(tn)); uint64(got) != tn.Size {
					t.Errorf("%s: %d bytes, want %d", tn.Name, got, tn.Size)
				}
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	f, err := Open(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Metadata()
	if md.Len() != 19 || len(f.Tensors()) != 48 {
		t.Errorf("%d KVs, %d tensors; want 19, 48", md.Len(), len(f.Tensors()))
	}
	for key, want := range map[string]uint64{
		"embedding_length": 64, "feed_forward_length": 172, "block_count": 5,
		"attention.head_count": 8, "attention.head_count_kv": 4, "rope.dimension_count": 8, "context_length": 2048,
	} {
		if got := md.ArchUint(key, 0); got != want {
			t.Errorf("llama.%s = %d, want %d", key, got, want)
		}
	}
	if eps := md.ArchFloat("attention.layer_norm_rms_epsilon", 0); eps != float64(float32(1e-5)) {
		t.Errorf("rms eps %v", eps)
	}
	if base := md.ArchFloat("rope.freq_base", 10000); base != 10000 {
		t.Errorf("rope.freq_base default %v", base)
	}
	if m, _ := md.String("tokenizer.ggml.model"); m != "llama" {
		t.Errorf("tokenizer model %q", m)
	}
	toks, _ := md.Strings("tokenizer.ggml.tokens")
	scores, _ := md.Float32s("tokenizer.ggml.scores")
	types, _ := md.Int32s("tokenizer.ggml.token_type")
	if len(toks) != 512 || len(scores) != 512 || len(types) != 512 {
		t.Fatalf("vocab arrays %d/%d/%d, want 512", len(toks), len(scores), len(types))
	}
	if toks[1] != "<s>" || toks[2] != "</s>" || scores[511] != -252 {
		t.Errorf("tokens[1,2]=%q,%q scores[511]=%v", toks[1], toks[2], scores[511])
	}
	counts := map[int32]int{}
	for _, ty := range types {
		counts[ty]++
	}
	if !reflect.DeepEqual(counts, map[int32]int{1: 253, 2: 1, 3: 2, 6: 256}) {
		t.Errorf("token type counts %v", counts)
	}
	if f.Alignment() != 32 {
		t.Errorf("alignment %d", f.Alignment())
	}
	emb, data, err := f.TensorData("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	if emb.Type != tensor.F32 || !reflect.DeepEqual(emb.Dims, []uint64{64, 512}) || emb.Offset != 14176 || len(data) != 64*512*4 {
		t.Errorf("token_embd: %+v", emb)
	}
	for _, tn := range f.Tensors() {
		if tn.Type != tensor.F32 {
			t.Errorf("%s is %s, want F32", tn.Name, tn.Type)
		}
	}
	// Tensor bytes equal the llama2.c checkpoint: the first embedding row
	// follows the 28-byte header there.
	bin, err := os.ReadFile(testdata.Path(t, "llama2c/stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, bin[28:28+len(data)]) {
		t.Error("token_embd.weight differs from stories260K.bin's embedding table")
	}
	if _, _, err := f.TensorData("nope"); !errors.Is(err, ErrUnknownTensor) {
		t.Errorf("unknown tensor: %v", err)
	}
}

func TestTinyRandom(t *testing.T) {
	f, err := Open(testdata.Path(t, "gguf/llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Metadata()
	if md.ArchUint("embedding_length", 0) != 8 || md.ArchUint("block_count", 0) != 1 || md.ArchUint("context_length", 0) != 4096 {
		t.Errorf("hyper-parameters wrong")
	}
	out, ok := f.Tensor("output.weight")
	if !ok || out.Type != tensor.F16 || !reflect.DeepEqual(out.Dims, []uint64{8, 32000}) {
		t.Errorf("output.weight %+v (untied, F16, [8,32000] expected)", out)
	}
	if q, _ := f.Tensor("blk.0.attn_q.weight"); q.Type != tensor.F16 {
		t.Errorf("attn_q is %s, want F16", q.Type)
	}
	if n, _ := f.Tensor("blk.0.attn_norm.weight"); n.Type != tensor.F32 {
		t.Errorf("attn_norm is %s, want F32", n.Type)
	}
	if toks, _ := md.Strings("tokenizer.ggml.tokens"); len(toks) != 32000 {
		t.Errorf("%d tokens", len(toks))
	}
}

// roundTrip writes f back and reads it again.
func roundTrip(t *testing.T, f *File) ([]byte, *File) {
	t.Helper()
	var ws []WriteTensor
	for _, tn := range f.Tensors() {
		ws = append(ws, WriteTensor{Name: tn.Name, Type: tn.Type, Dims: tn.Dims, Data: f.Data(tn)})
	}
	var buf bytes.Buffer
	if err := Write(&buf, f.Metadata(), ws); err != nil {
		t.Fatal(err)
	}
	g, err := Parse("roundtrip", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), g
}

func TestRoundTrip(t *testing.T) {
	for _, p := range allGGUF(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, g := roundTrip(t, f)
			if !reflect.DeepEqual(f.Metadata().KVs(), g.Metadata().KVs()) {
				t.Error("metadata differs after round trip")
			}
			if len(f.Tensors()) != len(g.Tensors()) {
				t.Fatalf("%d tensors, want %d", len(g.Tensors()), len(f.Tensors()))
			}
			for i, a := range f.Tensors() {
				b := g.Tensors()[i]
				if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Dims, b.Dims) || !bytes.Equal(f.Data(a), g.Data(b)) {
					t.Errorf("tensor %s differs after round trip", a.Name)
				}
			}
			// Files llama.cpp wrote come back byte for byte (the layout is the same).
			orig, _ := os.ReadFile(p)
			if len(f.Tensors()) > 0 && !bytes.Equal(orig, img) {
				t.Errorf("rewritten file is not byte-identical (%d vs %d bytes)", len(img), len(orig))
			}
		})
	}
}

func TestSplitModel(t *testing.T) {
	f, err := Open(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tensors := f.Tensors()
	const parts = 3
	per := (len(tensors) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		md := NewMetadata()
		if i == 0 {
			md = f.Metadata().Clone()
		}
		md.Set(KeySplitNo, uint16(i))
		md.Set(KeySplitCount, uint16(parts))
		md.Set(KeySplitTensors, int32(len(tensors)))
		var ws []WriteTensor
		for _, tn := range tensors[i*per : min((i+1)*per, len(tensors))] {
			ws = append(ws, WriteTensor{Name: tn.Name, Type: tn.Type, Dims: tn.Dims, Data: f.Data(tn)})
		}
		out, err := os.Create(SplitPath(filepath.Join(dir, "stories"), i, parts))
		if err != nil {
			t.Fatal(err)
		}
		if err := Write(out, md, ws); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	// Any part opens the whole model.
	g, err := Open(filepath.Join(dir, "stories-00002-of-00003.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.Paths()) != parts || len(g.Tensors()) != len(tensors) {
		t.Fatalf("%d parts, %d tensors", len(g.Paths()), len(g.Tensors()))
	}
	if g.Metadata().ArchUint("block_count", 0) != 5 {
		t.Error("metadata of the first part not presented")
	}
	for _, a := range tensors {
		b, data, err := g.TensorData(a.Name)
		if err != nil || !bytes.Equal(data, f.Data(a)) {
			t.Errorf("tensor %s (part %d): %v", a.Name, b.Split, err)
		}
	}
	// A missing part is a clear error.
	os.Remove(filepath.Join(dir, "stories-00003-of-00003.gguf"))
	if _, err := Open(filepath.Join(dir, "stories-00001-of-00003.gguf")); err == nil || !strings.Contains(err.Error(), "part 3 of 3") {
		t.Errorf("missing part: %v", err)
	}
}

// tinyFile builds a small valid file image with two tensors.
func tinyFile(t testing.TB) []byte {
	md := NewMetadata()
	md.Set("general.architecture", "llama")
	md.Set("llama.block_count", uint32(1))
	md.Set("nested", Array{TypeArray, []Array{{TypeInt32, []int32{1, 2}}, {TypeString, []string{"a"}}}})
	md.Set("flags", Array{TypeBool, []bool{true, false}})
	a := make([]byte, 4*8)
	b := make([]byte, 34)
	var buf bytes.Buffer
	err := Write(&buf, md, []WriteTensor{
		{Name: "a", Type: tensor.F32, Dims: []uint64{4, 2}, Data: a},
		{Name: "b", Type: tensor.Q8_0, Dims: []uint64{32}, Data: b},
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMalformed(t *testing.T) {
	good := tinyFile(t)
	if _, err := Parse("tiny", good); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	// Offsets into tinyFile's image, found by searching for known bytes.
	tensorInfo := bytes.Index(good, []byte("\x01\x00\x00\x00\x00\x00\x00\x00a\x02\x00\x00\x00")) // name "a", 2 dims
	dimsA := tensorInfo + 9 + 4
	typeA := dimsA + 16
	offA := typeA + 4
	offB := offA + 8 + 9 + 4 + 8 + 4
	mutate := func(f func(b []byte) []byte) []byte {
		return f(bytes.Clone(good))
	}
	cases := []struct {
		name  string
		data  []byte
		err   error
		field string
	}{
		{"empty", nil, ErrNotGGUF, "magic"},
		{"bad magic", mutate(func(b []byte) []byte { copy(b, "GGML"); return b }), ErrNotGGUF, "magic"},
		{"version 1", mutate(func(b []byte) []byte { le.PutUint32(b[4:], 1); return b }), ErrUnsupportedVersion, "version"},
		{"big-endian", mutate(func(b []byte) []byte { le.PutUint32(b[4:], 3<<24); return b }), ErrUnsupportedVersion, "big-endian"},
		{"absurd tensor count", mutate(func(b []byte) []byte { le.PutUint64(b[8:], 1<<60); return b }), ErrTruncated, "tensor count"},
		{"absurd kv count", mutate(func(b []byte) []byte { le.PutUint64(b[16:], 1<<62); return b }), ErrTruncated, "metadata count"},
		{"absurd key length", mutate(func(b []byte) []byte { le.PutUint64(b[24:], 1<<63); return b }), ErrTruncated, "metadata key #0"},
		{"unknown value type", mutate(func(b []byte) []byte {
			i := bytes.Index(b, []byte("general.architecture")) + len("general.architecture")
			le.PutUint32(b[i:], 77)
			return b
		}), ErrInvalid, "unknown value type 77"},
		{"too many dims", mutate(func(b []byte) []byte { le.PutUint32(b[dimsA-4:], 5); return b }), ErrInvalid, "dimension count"},
		{"zero dim", mutate(func(b []byte) []byte { le.PutUint64(b[dimsA:], 0); return b }), ErrInvalid, "dims"},
		{"overflowing dims", mutate(func(b []byte) []byte { le.PutUint64(b[dimsA:], 1<<40); le.PutUint64(b[dimsA+8:], 1<<40); return b }), ErrInvalid, "dims"},
		// 2^62 F32 elements are 2^64 bytes: a size that wraps to 0 would
		// fit any file (strata inspect showed such a tensor as 0 bytes).
		{"size overflowing 64 bits", mutate(func(b []byte) []byte { le.PutUint64(b[dimsA:], 1<<31); le.PutUint64(b[dimsA+8:], 1<<31); return b }), ErrInvalid, "do not fit"},
		{"unknown tensor type", mutate(func(b []byte) []byte { le.PutUint32(b[typeA:], 4); return b }), ErrInvalid, "unknown tensor type 4"},
		{"partial block", mutate(func(b []byte) []byte { le.PutUint32(b[typeA:], uint32(tensor.Q4_0)); return b }), ErrInvalid, "whole number"},
		{"misaligned offset", mutate(func(b []byte) []byte { le.PutUint64(b[offA:], 3); return b }), ErrInvalid, "alignment"},
		{"offset out of range", mutate(func(b []byte) []byte { le.PutUint64(b[offB:], 1<<40); return b }), ErrTruncated, `tensor "b" data`},
		{"overlapping tensors", mutate(func(b []byte) []byte { le.PutUint64(b[offB:], 0); return b }), ErrInvalid, "overlaps"},
		{"truncated data", good[:len(good)-40], ErrTruncated, `tensor "b" data`},
		{"bad alignment", func() []byte {
			img := []byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00")
			img = append(img, "\x11\x00\x00\x00\x00\x00\x00\x00general.alignment\x04\x00\x00\x00\x18\x00\x00\x00"...)
			return img
		}(), ErrInvalid, "power of two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.gguf", c.data)
			if !errors.Is(err, c.err) {
				t.Fatalf("got %v, want %v", err, c.err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != "bad.gguf" || !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name file and %q", err, c.field)
			}
		})
	}
}

// Every prefix of a valid file is an error, never a panic.
func TestEveryTruncation(t *testing.T) {
	good := tinyFile(t)
	for n := 0; n < len(good)-1; n++ {
		if _, err := Parse("t", good[:n]); err == nil {
			// The data section starts after padding; only cuts inside the
			// last tensor's data or padding can be reported.
			if n < len(good)-32 {
				t.Errorf("prefix of %d bytes parsed without error", n)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(t.TempDir()); err == nil {
		t.Error("directory opened")
	}
	empty := filepath.Join(t.TempDir(), "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("empty file: %v", err)
	}
}

func TestMetadataAccessors(t *testing.T) {
	md := NewMetadata()
	md.Set("general.architecture", "qwen3")
	md.Set("qwen3.block_count", uint32(28))
	md.Set("neg", int32(-1))
	md.Set("u64", Array{TypeUint64, []uint64{1, 2}})
	if md.ArchUint("block_count", 0) != 28 || md.ArchUint("missing", 7) != 7 {
		t.Error("ArchUint")
	}
	if _, ok := md.Uint("neg"); ok {
		t.Error("negative read as unsigned")
	}
	if v, ok := md.Int32s("u64"); !ok || !reflect.DeepEqual(v, []int32{1, 2}) {
		t.Errorf("Int32s %v", v)
	}
	if err := md.Set("bad", 3); err == nil {
		t.Error("Go int accepted")
	}
	if err := md.Set("bad", Array{TypeInt32, []string{"x"}}); err == nil {
		t.Error("mismatched array accepted")
	}
	md.Delete("neg")
	if _, ok := md.Get("neg"); ok || md.Len() != 3 || md.Keys()[2] != "u64" {
		t.Error("Delete")
	}
}

func TestWriteStreamedAndSparse(t *testing.T) {
	md := NewMetadata()
	md.Set("general.architecture", "llama")
	data := bytes.Repeat([]byte{7}, 64*4)
	tensors := []WriteTensor{
		{Name: "streamed", Type: tensor.F32, Dims: []uint64{64}, WriteData: func(w io.Writer) error { _, err := w.Write(data); return err }},
		{Name: "zeros", Type: tensor.F32, Dims: []uint64{1 << 20}},
		{Name: "tail", Type: tensor.F32, Dims: []uint64{3}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, md, tensors); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sparse.gguf")
	out, _ := os.Create(path)
	if err := Write(out, md, tensors); err != nil {
		t.Fatal(err)
	}
	out.Close()
	onDisk, _ := os.ReadFile(path)
	if !bytes.Equal(onDisk, buf.Bytes()) {
		t.Fatalf("sparse file (%d bytes) differs from the buffered image (%d bytes)", len(onDisk), buf.Len())
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, d, _ := f.TensorData("streamed"); !bytes.Equal(d, data) {
		t.Error("streamed tensor differs")
	}
	if _, d, _ := f.TensorData("zeros"); len(d) != 4<<20 || bytes.Count(d, []byte{0}) != len(d) {
		t.Error("zero tensor is not zeros")
	}
	short := []WriteTensor{{Name: "s", Type: tensor.F32, Dims: []uint64{64}, WriteData: func(w io.Writer) error { _, err := w.Write(data[:10]); return err }}}
	if err := Write(io.Discard, md, short); err == nil || !strings.Contains(err.Error(), "wrote 10 bytes") {
		t.Errorf("short stream: %v", err)
	}
}
