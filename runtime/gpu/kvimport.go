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
// imported again).
type kvImport struct {
	k, v         *Buffer
	kAddr, vAddr uintptr
	kLen, vLen   int
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
	kmem, vmem := c.Layer(l)
	key := kvKey{cacheKey(c), l}
	if imp := t.byKey[key]; imp != nil {
		ka, kn := addrLen(kmem)
		va, vn := addrLen(vmem)
		if imp.kAddr == ka && imp.kLen == kn && imp.vAddr == va && imp.vLen == vn {
			return imp.k, imp.v, nil
		}
		imp.free()
		delete(t.byKey, key)
	}
	if k, err = d.Import(kmem); err != nil {
		return nil, nil, err
	}
	if len(vmem) > 0 { // latent attention caches keys only
		if v, err = d.Import(vmem); err != nil {
			k.Free()
			return nil, nil, err
		}
	}
	if len(t.byKey) >= maxKVImports {
		temp.add(k, nil)
		if v != nil {
			temp.add(v, nil)
		}
		return k, v, nil
	}
	if t.byKey == nil {
		t.byKey, t.watched = map[kvKey]*kvImport{}, map[weak.Pointer[model.Cache]]bool{}
	}
	imp := &kvImport{k: k, v: v}
	imp.kAddr, imp.kLen = addrLen(kmem)
	imp.vAddr, imp.vLen = addrLen(vmem)
	t.byKey[key] = imp
	if !t.watched[key.cache] {
		t.watched[key.cache] = true
		runtime.AddCleanup(c, func(dead *atomic.Int64) { dead.Add(1) }, &t.dead)
	}
	return k, v, nil
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
