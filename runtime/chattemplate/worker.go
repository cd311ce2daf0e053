package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/ardanlabs/jinja"
)

// init turns this process into a template worker when its parent asked
// for one; it never returns then.
func init() {
	if os.Getenv(workerEnv) != workerMagic {
		return
	}
	os.Exit(serve(os.NewFile(3, "requests"), os.NewFile(4, "responses")))
}

// serve answers requests until the parent closes its end. The limits
// come with every request; the first one sets them for the process.
func serve(in, out *os.File) int {
	var once sync.Once
	compiled := map[string]*jinja.Template{} // by source; at most a few models per node
	for {
		b, err := readFrame(in, 64<<20)
		if err != nil {
			return 0
		}
		var req request
		if err := json.Unmarshal(b, &req); err != nil {
			return 2
		}
		once.Do(func() { limit(req.MaxStack, req.MaxMemory) })
		resp := renderOne(compiled, req)
		b, err = json.Marshal(resp)
		if err != nil {
			return 2
		}
		if err := writeFrame(out, b); err != nil {
			return 0
		}
	}
}

// limit caps the stack (deeper recursion is a fatal error, ending only
// this process) and the memory the runtime holds (checked every few
// milliseconds: a huge allocation shows at once, before it is filled).
func limit(maxStack int, maxMemory uint64) {
	debug.SetMaxStack(maxStack)
	debug.SetMemoryLimit(int64(maxMemory) / 2) // collect hard well before the cap
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
		for range time.Tick(5 * time.Millisecond) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > maxMemory {
				fmt.Fprintf(os.Stderr, "chattemplate worker: memory %d bytes exceeds the limit of %d\n", sample[0].Value.Uint64(), maxMemory)
				os.Exit(3)
			}
		}
	}()
}

func renderOne(compiled map[string]*jinja.Template, req request) (resp response) {
	defer func() {
		if p := recover(); p != nil { // a bug of the library on this input
			resp = response{Kind: kindLimit, Error: fmt.Sprintf("the template library panicked: %v", p)}
		}
	}()
	t, ok := compiled[req.Source]
	if !ok {
		var err error
		if t, err = jinja.Compile(req.Source); err != nil {
			return response{Kind: kindCompile, Error: err.Error()}
		}
		if len(compiled) >= 16 {
			clear(compiled)
		}
		compiled[req.Source] = t
	}
	vars, err := decodeVars(req.Vars)
	if err != nil {
		return response{Kind: kindRefused, Error: err.Error()}
	}
	out, err := t.RenderValues(vars)
	if err != nil {
		return response{Kind: kindRefused, Error: err.Error()}
	}
	if len(out) > req.MaxOutput {
		return response{Kind: kindLimit, Error: fmt.Sprintf("the output has %d bytes, more than %d", len(out), req.MaxOutput)}
	}
	return response{Output: out}
}

// decodeVars reads the variables of a render, keeping the order of each
// object's keys (Python's json.loads does, and templates print objects
// with tojson) and integers apart from floats (3, not 3.0).
func decodeVars(raw json.RawMessage) (map[string]jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("the variables: %w", err)
	}
	if !v.IsDict() {
		return nil, errors.New("the variables are not an object")
	}
	d := v.AsDict()
	out := make(map[string]jinja.Value, d.Len())
	for _, k := range d.Keys {
		out[k] = d.Data[k]
	}
	return out, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := jinja.NewDict()
			d := v.AsDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return v, err
				}
				key, _ := k.(string)
				item, err := decodeValue(dec)
				if err != nil {
					return v, err
				}
				d.Set(key, item)
			}
			_, err := dec.Token() // '}'
			return v, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				item, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, item)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	default:
		return jinja.FromGoValue(t), nil // nil, bool, json.Number, string
	}
}
