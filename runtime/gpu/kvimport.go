package gpu

import (
	"runtime"
	"sync/atomic"
	"unsafe"
	"weak"

	"strata/runtime/model"
)

// The KV caches' imports, kept across calls. Importing host memory is a
// driver call that may pin every page of the range (a long context's
// layer is megabytes), so a whole layer imports each cache's layer once
// and keeps the import while the Cache lives: Go never moves a live
// object nor returns its pages. Once the Cache is unreachable a cleanup
// counts it and the next call frees its imports. Until then the import
// outlives the memory (Go may reuse or return those pages first), which
// is safe because a dead cache's entry is never used again: keys hold
// weak pointers, and a dead Cache's never equals a new one's at the same
// address. On a driver that pins imported pages they stay pinned until
// that next call (an idle node keeps them). Past maxKVImports the imports
// of a call are made for that call only, as drivers cap allocations
// (4096 on many; the bound is per Offload, so several shards on one
// device may hold more).

// maxKVImports is how many cache layers (each a K and a V import) the
// device keeps imported (a variable for tests).
var maxKVImports = 512

// kvKey is one layer of one Cache.
type kvKey struct {
	cache weak.Pointer[model.Cache]
	layer int
}

// kvImport is a layer's K and V memory as imported: the buffers and the
// ranges they were made for (a Cache whose layer now lies elsewhere is
// imported again). A mirror (a discrete GPU's copy in its own memory)
// also records the cache's HostWrites when it was last loaded.
type kvImport struct {
	k, v         *Buffer
	kAddr, vAddr uintptr
	kLen, vLen   int
	mirror       bool
	loaded       bool   // rows [0, Len) were loaded once
	writes       uint64 // the layer's HostWrites then
}

// stale reports whether a mirror may differ from the host's rows of
// layer l of c: never loaded, or the host stored into the layer since.
func (imp *kvImport) stale(c *model.Cache, l int) bool {
	return !imp.loaded || imp.writes != c.HostWrites(l)
}

// kvImports is the Offload's table of imports (under its layerMu).
type kvImports struct {
	byKey   map[kvKey]*kvImport
	watched map[weak.Pointer[model.Cache]]bool // caches with a cleanup registered
	dead    atomic.Int64                       // watched caches gone since the last sweep
}

func addrLen(b []byte) (uintptr, int) {
	if len(b) == 0 {
		return 0, 0
	}
	return uintptr(unsafe.Pointer(&b[0])), len(b)
}

// layer returns the device's buffers of layer l's keys and values in c,
// imported now or earlier (v nil for a cache of keys only: latent
// attention). Buffers put in temp are the call's own: the
// caller frees them after its submission.
func (t *kvImports) layer(d *Device, c *model.Cache, l int, temp *scratch) (k, v *Buffer, err error) {
	if t.dead.Swap(0) > 0 {
		t.sweep()
	}
	imp, err := t.get(d, c, l, temp, false)
	if err != nil {
		return nil, nil, err
	}
	return imp.k, imp.v, nil
}

// mirror returns the device's copy of layer l's keys and values in c, in
// its own memory (a discrete GPU, which cannot read the host's), made now
// or earlier and kept while the Cache lives, as imports are. The caller
// loads rows [0, Len) into it where it is stale, and copies back what
// the device writes, so that the host's cache stays whole for the CPU's
// prompt cache, rollback and replay.
func (t *kvImports) mirror(d *Device, c *model.Cache, l int, temp *scratch) (*kvImport, error) {
	return t.get(d, c, l, temp, true)
}

// get is layer l of c's import or mirror, from the table or made now
// (past maxKVImports, the call's own: its buffers go in temp).
func (t *kvImports) get(d *Device, c *model.Cache, l int, temp *scratch, mirror bool) (*kvImport, error) {
	if t.dead.Swap(0) > 0 {
		t.sweep()
	}
	kmem, vmem := c.Layer(l)
	key := kvKey{cacheKey(c), l}
	if imp := t.byKey[key]; imp != nil {
		ka, kn := addrLen(kmem)
		va, vn := addrLen(vmem)
		if imp.kAddr == ka && imp.kLen == kn && imp.vAddr == va && imp.vLen == vn && imp.mirror == mirror {
			return imp, nil
		}
		imp.free()
		delete(t.byKey, key)
	}
	alloc := d.Import
	if mirror {
		alloc = func(b []byte) (*Buffer, error) { return d.newLocalBuffer(len(b)) }
	}
	imp := &kvImport{mirror: mirror}
	var err error
	if imp.k, err = alloc(kmem); err != nil {
		return nil, err
	}
	if len(vmem) > 0 { // latent attention caches keys only
		if imp.v, err = alloc(vmem); err != nil {
			imp.k.Free()
			return nil, err
		}
	}
	if len(t.byKey) >= maxKVImports {
		temp.add(imp.k, nil)
		if imp.v != nil {
			temp.add(imp.v, nil)
		}
		return imp, nil
	}
	if t.byKey == nil {
		t.byKey, t.watched = map[kvKey]*kvImport{}, map[weak.Pointer[model.Cache]]bool{}
	}
	imp.kAddr, imp.kLen = addrLen(kmem)
	imp.vAddr, imp.vLen = addrLen(vmem)
	t.byKey[key] = imp
	if !t.watched[key.cache] {
		t.watched[key.cache] = true
		runtime.AddCleanup(c, func(dead *atomic.Int64) { dead.Add(1) }, &t.dead)
	}
	return imp, nil
}

// sweep frees the imports of caches that are gone.
func (t *kvImports) sweep() {
	for key, imp := range t.byKey {
		if key.cache.Value() == nil {
			imp.free()
			delete(t.byKey, key)
		}
	}
	for c := range t.watched {
		if c.Value() == nil {
			delete(t.watched, c)
		}
	}
}

// free frees every import.
func (t *kvImports) free() {
	for _, imp := range t.byKey {
		imp.free()
	}
	t.byKey, t.watched = nil, nil
}

func (imp *kvImport) free() {
	imp.k.Free()
	if imp.v != nil {
		imp.v.Free()
	}
}

// held is how many cache layers are imported.
func (t *kvImports) held() int { return len(t.byKey) }

// cacheKey is c's key in the table.
func cacheKey(c *model.Cache) weak.Pointer[model.Cache] { return weak.Make(c) }

// kvSync is one segment's mirror in a whole layer's call: whether rows
// [0, Len) are loaded into it first, and where the loaded rows and the
// rows the layer writes lie in the staging buffer.
type kvSync struct {
	imp             *kvImport
	seg             model.Segment
	load            bool
	loadAt, storeAt int
}

// loadMirrors records, first in r, the loads of the stale mirrors of
// syncs (layer l) from the staging buffer, their rows copied there now,
// and places every segment's new rows after them.
func (o *Offload) loadMirrors(r *recorder, l int, syncs []kvSync) error {
	at := 0
	for i := range syncs {
		s := &syncs[i]
		heads, rb := s.seg.Cache.Layout()
		buffers := 1
		if s.imp.v != nil {
			buffers = 2
		}
		if s.load {
			s.loadAt = at
			at += buffers * heads * s.seg.Cache.Len * rb
		}
		s.storeAt = at
		at += buffers * heads * s.seg.N * rb
	}
	if len(syncs) == 0 {
		return nil
	}
	if o.staging == nil || int(o.staging.size) < at {
		if o.staging != nil {
			o.staging.Free()
			o.staging = nil
		}
		b, err := o.d.NewBuffer(max(at, 4096))
		if err != nil {
			return err
		}
		o.staging = b
	}
	staging := o.staging.Bytes()
	for i := range syncs {
		s := &syncs[i]
		c := s.seg.Cache
		if !s.load {
			continue
		}
		heads, rb := c.Layout()
		at, run := s.loadAt, c.Len*rb
		kmem, vmem := c.Layer(l)
		for _, m := range []struct {
			mem []byte
			buf *Buffer
		}{{kmem, s.imp.k}, {vmem, s.imp.v}} {
			if m.buf == nil {
				continue
			}
			for h := range heads {
				copy(staging[at+h*run:], m.mem[h*c.Capacity*rb:h*c.Capacity*rb+run])
			}
			if run > 0 {
				r.blocks(o.staging, m.buf, heads, 1, run/4, at/4, run/4, 0, 0, c.Capacity*rb/4, 0)
			}
			at += heads * run
		}
		s.imp.loaded, s.imp.writes = true, c.HostWrites(l)
	}
	return nil
}

// recordStores records, last in r, the copies of the rows the layer
// wrote into each mirror to the staging buffer.
func (o *Offload) recordStores(r *recorder, syncs []kvSync) {
	for i := range syncs {
		s := &syncs[i]
		c := s.seg.Cache
		heads, rb := c.Layout()
		at, run := s.storeAt, s.seg.N*rb
		for _, buf := range []*Buffer{s.imp.k, s.imp.v} {
			if buf != nil {
				r.blocks(buf, o.staging, heads, 1, run/4, c.Len*rb/4, c.Capacity*rb/4, 0, at/4, run/4, 0)
				at += heads * run
			}
		}
	}
}

// storeRows copies the rows the layer wrote, from the staging buffer
// after the submission, into the host's cache (layer l).
func (o *Offload) storeRows(l int, syncs []kvSync) {
	if len(syncs) == 0 {
		return
	}
	staging := o.staging.Bytes()
	for i := range syncs {
		s := &syncs[i]
		c := s.seg.Cache
		heads, rb := c.Layout()
		at, run := s.storeAt, s.seg.N*rb
		kmem, vmem := c.Layer(l)
		for _, mem := range [][]byte{kmem, vmem} {
			if len(mem) == 0 {
				continue
			}
			for h := range heads {
				off := (h*c.Capacity + c.Len) * rb
				copy(mem[off:off+run], staging[at+h*run:])
			}
			at += heads * run
		}
	}
}
