package model

import "strings"

// decodeCounter fills a Profile's ActiveLayerBytes and AttnLayerBytes
// tensor by tensor: the bytes one decoded token reads of each layer.
type decodeCounter struct {
	p            *Profile
	used, expert uint64 // experts used per token, experts per layer (0: dense)
}

func newDecodeCounter(p *Profile, used, experts uint64) *decodeCounter {
	p.ActiveLayerBytes = make([]uint64, p.Layers)
	p.AttnLayerBytes = make([]uint64, p.Layers)
	p.ExpertLayerBytes = make([]uint64, p.Layers)
	if used > experts {
		used = experts
	}
	if experts <= 1<<30 {
		p.Experts, p.ExpertsUsed = int(experts), int(used)
	}
	return &decodeCounter{p: p, used: used, expert: experts}
}

// add counts tensor name (of layer l, size bytes): a 3-D expert tensor
// (ffn_*_exps) is read for ExpertsUsed of its experts; everything else
// whole.
func (d *decodeCounter) add(l int, name string, size uint64) {
	switch {
	case strings.Contains(name, "_exps.") && d.expert > 0:
		// size/expert first: size*used could overflow on a crafted file.
		d.p.ActiveLayerBytes[l] += size / d.expert * d.used
		d.p.ExpertLayerBytes[l] += size
	case strings.Contains(name, ".attn_"):
		d.p.ActiveLayerBytes[l] += size
		d.p.AttnLayerBytes[l] += size
	default:
		d.p.ActiveLayerBytes[l] += size
	}
}
