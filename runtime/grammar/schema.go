// Package grammar constrains generation to JSON documents that match a
// JSON schema: a Schema compiled from the schema is a pushdown recognizer
// over bytes, and a Matcher walks a vocabulary's token trie against the
// recognizer's state to mask, before each sampling step, every token that
// cannot continue a valid document. So even a model that never saw JSON
// writes a document that parses and validates.
//
// Compile a schema once per request, VocabOf once per tokenizer (the
// caller caches it), and a NewMatcher per generation: a sample.Constraint
// for the sampler (Example).
//
// Supported: type object (properties, required, additionalProperties
// false is implied: only the listed properties are written, in the
// schema's order), string (minLength, maxLength), integer (minimum,
// maximum, exclusiveMinimum, exclusiveMaximum), number, boolean, null,
// enum and const (of any JSON values), array (items, minItems,
// maxItems), and the empty schema {} (any JSON value). Output is compact
// JSON: no whitespace between tokens. Other keywords (anyOf, $ref,
// pattern, format, minimum on numbers) are refused by Compile, so that a
// document is never claimed to validate against rules that were not
// enforced.
//
// With a token budget, the Matcher also keeps the shortest way to finish
// the document within the tokens left: a generation cut by max_tokens
// still ends in a complete document (each byte of the shortest ending is
// one token at worst, as byte-level and byte-fallback vocabularies have a
// token for every byte).
package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// ErrSchema is wrapped by every error Compile returns.
var ErrSchema = errors.New("grammar: unsupported JSON schema")

type kind uint8

const (
	kAny kind = iota
	kObject
	kArray
	kString
	kInteger
	kNumber
	kLiteral
)

// node is one compiled schema.
type node struct {
	kind kind
	// object
	props   []prop
	free    bool  // any keys, any values (an object in an "any" value)
	reqTail []int // reqTail[j]: fewest bytes for the required members from j on, each with its comma, and the '}'
	// array
	items              *node
	minItems, maxItems int // maxItems < 0: no bound
	// string
	minLen, maxLen int // maxLen < 0: no bound
	// integer
	lo, hi int64
	// literal
	lits []string // JSON encodings of the allowed values
	// min is the fewest bytes of any document of this node.
	min int
}

type prop struct {
	key      string // the key as JSON writes it, without the quotes
	val      *node
	required bool
}

// Limits on what one schema may ask, so that a schema from a request
// cannot make compiling or matching expensive.
const (
	maxProps = 64 // properties of one object (a bitmask of candidates)
	maxLits  = 64 // values of one enum
	maxDepth = 32 // nesting of the schema
	maxNodes = 4096
	// maxMinBytes bounds the shortest document of any node: far past any
	// context, and small enough that sums and products of children's stay
	// in range.
	maxMinBytes = 1 << 24
	intDigits   = 18 // digits of an integer (fits int64)
	numDigits   = 16 // digits of each part of a number
	anyStrings  = -1
)

// Schema is a compiled JSON schema, safe for concurrent use by Matchers.
type Schema struct {
	root  *node
	nodes int
	src   []byte // the JSON text compiled; nil for AnyJSON
}

// Source is the JSON text s was compiled from (nil for AnyJSON): what
// travels to a remote sampler, which compiles it again.
func (s *Schema) Source() []byte { return s.src }

// Generic nodes for "any JSON value".
var (
	anyNode     = &node{kind: kAny, min: 1}
	anyObject   = &node{kind: kObject, free: true, min: 2}
	anyArray    = &node{kind: kArray, items: anyNode, maxItems: -1, min: 2}
	anyString   = &node{kind: kString, maxLen: -1, min: 2}
	anyNumber   = &node{kind: kNumber, min: 1}
	anyLiterals = &node{kind: kLiteral, lits: []string{"true", "false", "null"}, min: 4}
)

// Compile compiles a JSON schema (JSON text). See the package
// documentation for what is supported.
func Compile(schema []byte) (*Schema, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	v, err := decodeOrdered(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrSchema, err)
	}
	s := &Schema{src: bytes.Clone(schema)}
	root, err := s.compile(v, 0, "")
	if err != nil {
		return nil, err
	}
	s.root = root
	return s, nil
}

// AnyJSON is the schema of any JSON value (OpenAI's json_object mode,
// Ollama's "format": "json").
func AnyJSON() *Schema { return &Schema{root: anyNode} }

func (s *Schema) compile(v any, depth int, path string) (*node, error) {
	n, err := s.compileNode(v, depth, path)
	if err == nil && n.min > maxMinBytes {
		// Checked at every node, so a parent's sums and products of its
		// children's (minItems up to 2^20, nested 32 deep) never overflow.
		return nil, fmt.Errorf("%w: the shortest document at %s is over %d bytes: no answer could be that long", ErrSchema, pathOr(path), maxMinBytes)
	}
	return n, err
}

func (s *Schema) compileNode(v any, depth int, path string) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d at %s", ErrSchema, maxDepth, pathOr(path))
	}
	if s.nodes++; s.nodes > maxNodes {
		return nil, fmt.Errorf("%w: more than %d subschemas", ErrSchema, maxNodes)
	}
	if b, ok := v.(bool); ok {
		if b {
			return anyNode, nil
		}
		return nil, fmt.Errorf("%w: the schema false at %s admits nothing", ErrSchema, pathOr(path))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: a schema must be an object, at %s", ErrSchema, pathOr(path))
	}
	for k := range m {
		if !known[k] && k != orderKey {
			return nil, fmt.Errorf("%w: keyword %q at %s is not supported", ErrSchema, k, pathOr(path))
		}
	}
	if c, ok := m["const"]; ok {
		return literals([]any{c}, path)
	}
	if e, ok := m["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("%w: enum at %s must be a non-empty array", ErrSchema, pathOr(path))
		}
		return literals(list, path)
	}
	t, _ := m["type"].(string)
	if _, ok := m["type"]; ok && t == "" {
		return nil, fmt.Errorf("%w: type at %s must be one string (type lists are not supported)", ErrSchema, pathOr(path))
	}
	switch t {
	case "":
		if _, ok := m["properties"]; ok {
			return s.object(m, depth, path)
		}
		return anyNode, nil
	case "object":
		return s.object(m, depth, path)
	case "array":
		n := &node{kind: kArray, items: anyNode, maxItems: -1}
		if it, ok := m["items"]; ok {
			var err error
			if n.items, err = s.compile(it, depth+1, path+"[]"); err != nil {
				return nil, err
			}
		}
		var err error
		if n.minItems, err = count(m, "minItems", 0, path); err != nil {
			return nil, err
		}
		if n.maxItems, err = count(m, "maxItems", -1, path); err != nil {
			return nil, err
		}
		if n.maxItems >= 0 && n.maxItems < n.minItems {
			return nil, fmt.Errorf("%w: maxItems < minItems at %s", ErrSchema, pathOr(path))
		}
		n.min = 2 + n.minItems*n.items.min + max(0, n.minItems-1)
		return n, nil
	case "string":
		n := &node{kind: kString}
		var err error
		if n.minLen, err = count(m, "minLength", 0, path); err != nil {
			return nil, err
		}
		if n.maxLen, err = count(m, "maxLength", -1, path); err != nil {
			return nil, err
		}
		if n.maxLen >= 0 && n.maxLen < n.minLen {
			return nil, fmt.Errorf("%w: maxLength < minLength at %s", ErrSchema, pathOr(path))
		}
		n.min = 2 + n.minLen
		return n, nil
	case "integer":
		n := &node{kind: kInteger, lo: -maxInt, hi: maxInt}
		for _, b := range []struct {
			key        string
			dst        *int64
			up, strict bool
		}{{"minimum", &n.lo, true, false}, {"exclusiveMinimum", &n.lo, true, true}, {"maximum", &n.hi, false, false}, {"exclusiveMaximum", &n.hi, false, true}} {
			raw, ok := m[b.key]
			if !ok {
				continue
			}
			f, err := number(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: %s at %s: %v", ErrSchema, b.key, pathOr(path), err)
			}
			// The tightest integer bound the number allows.
			var x float64
			switch {
			case b.up && b.strict:
				x = math.Floor(f) + 1
			case b.up:
				x = math.Ceil(f)
			case b.strict:
				x = math.Ceil(f) - 1
			default:
				x = math.Floor(f)
			}
			x = max(min(x, maxInt), -maxInt)
			if b.up {
				*b.dst = max(*b.dst, int64(x))
			} else {
				*b.dst = min(*b.dst, int64(x))
			}
		}
		if n.lo > n.hi {
			return nil, fmt.Errorf("%w: no integer lies between minimum and maximum at %s", ErrSchema, pathOr(path))
		}
		n.min = intMinLen(n.lo, n.hi)
		return n, nil
	case "number":
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := m[k]; ok {
				return nil, fmt.Errorf("%w: %s on a number at %s (bounds are enforced on integers only)", ErrSchema, k, pathOr(path))
			}
		}
		return anyNumber, nil
	case "boolean":
		return literals([]any{true, false}, path)
	case "null":
		return literals([]any{nil}, path)
	}
	return nil, fmt.Errorf("%w: type %q at %s", ErrSchema, t, pathOr(path))
}

// maxInt bounds integers to intDigits digits.
const maxInt = 999_999_999_999_999_999

var known = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "enum": true, "const": true,
	// Annotations, which constrain nothing.
	"title": true, "description": true, "$schema": true, "$id": true, "default": true, "examples": true, "$comment": true, "strict": true,
}

func pathOr(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

func (s *Schema) object(m map[string]any, depth int, path string) (*node, error) {
	n := &node{kind: kObject}
	props, _ := m["properties"].(map[string]any)
	if _, ok := m["properties"]; ok && props == nil {
		return nil, fmt.Errorf("%w: properties at %s must be an object", ErrSchema, pathOr(path))
	}
	if len(props) > maxProps+1 {
		return nil, fmt.Errorf("%w: more than %d properties at %s", ErrSchema, maxProps, pathOr(path))
	}
	if props == nil {
		if ap, ok := m["additionalProperties"]; ok && ap != true {
			if _, isObj := ap.(map[string]any); isObj {
				return nil, fmt.Errorf("%w: additionalProperties schemas at %s", ErrSchema, pathOr(path))
			}
			return &node{kind: kObject, reqTail: []int{1}, min: 2}, nil // {} only
		}
		return anyObject, nil
	}
	req := map[string]bool{}
	if r, ok := m["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: required at %s must be an array", ErrSchema, pathOr(path))
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%w: required at %s must list strings", ErrSchema, pathOr(path))
			}
			if _, ok := props[name]; !ok {
				return nil, fmt.Errorf("%w: required property %q at %s is not in properties", ErrSchema, name, pathOr(path))
			}
			req[name] = true
		}
	}
	if ap, ok := m["additionalProperties"]; ok && ap != false && ap != true {
		return nil, fmt.Errorf("%w: additionalProperties schemas at %s (only the listed properties are written)", ErrSchema, pathOr(path))
	}
	// Properties are written in the order the schema lists them: JSON
	// objects in Go maps lose it, so it is read again from the text.
	for _, name := range keyOrder(props) {
		val, err := s.compile(props[name], depth+1, path+"."+name)
		if err != nil {
			return nil, err
		}
		key, _ := json.Marshal(name)
		n.props = append(n.props, prop{key: string(key[1 : len(key)-1]), val: val, required: req[name]})
	}
	n.reqTail = make([]int, len(n.props)+1)
	n.reqTail[len(n.props)] = 1
	for j := len(n.props) - 1; j >= 0; j-- {
		n.reqTail[j] = n.reqTail[j+1]
		if p := n.props[j]; p.required {
			n.reqTail[j] += 1 + len(p.key) + 3 + p.val.min
		}
	}
	n.min = 1 + n.reqTail[0]
	if len(req) > 0 {
		n.min-- // the first member has no comma before it
	}
	return n, nil
}

// keyOrder returns the property names in the order the schema text
// gives them (decodeOrdered keeps it under orderKey).
func keyOrder(props map[string]any) []string {
	if names, ok := props[orderKey].([]string); ok {
		return names
	}
	var names []string
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// orderKey is where decodeOrdered leaves an object's key order.
const orderKey = "\x00order"

// decodeOrdered decodes one JSON value like json.Decoder.Decode into any
// (numbers as json.Number), except that each object also holds its keys
// in order under orderKey: JSON Schema has no order, but a document is
// easiest to read (and the model's task most natural) in the order the
// author wrote the properties.
func decodeOrdered(dec *json.Decoder, depth int) (any, error) {
	if depth > 2*maxDepth+2 {
		return nil, errors.New("nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		m := map[string]any{}
		var order []string
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := m[k]; !dup {
				order = append(order, k)
			}
			m[k] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		m[orderKey] = order
		return m, nil
	case json.Delim('['):
		var list []any
		for dec.More() {
			v, err := decodeOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		if list == nil {
			list = []any{}
		}
		return list, nil
	}
	return t, nil
}

func count(m map[string]any, key string, def int, path string) (int, error) {
	raw, ok := m[key]
	if !ok {
		return def, nil
	}
	f, err := number(raw)
	if err != nil || f < 0 || f != math.Trunc(f) || f > 1<<20 {
		return 0, fmt.Errorf("%w: %s at %s must be a whole number from 0 to %d", ErrSchema, key, pathOr(path), 1<<20)
	}
	return int(f), nil
}

func number(v any) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	return n.Float64()
}

func literals(vals []any, path string) (*node, error) {
	if len(vals) > maxLits {
		return nil, fmt.Errorf("%w: more than %d enum values at %s", ErrSchema, maxLits, pathOr(path))
	}
	n := &node{kind: kLiteral, min: math.MaxInt}
	seen := map[string]bool{}
	for _, v := range vals {
		b, err := json.Marshal(plain(v))
		if err != nil {
			return nil, fmt.Errorf("%w: enum value at %s: %v", ErrSchema, pathOr(path), err)
		}
		if !seen[string(b)] {
			seen[string(b)] = true
			n.lits = append(n.lits, string(b))
			n.min = min(n.min, len(b))
		}
	}
	return n, nil
}

// intMinLen is the length of the shortest integer in [lo, hi].
func intMinLen(lo, hi int64) int {
	switch {
	case lo <= 0 && hi >= 0:
		return 1
	case lo > 0:
		return len(strconv.FormatInt(lo, 10))
	default:
		return len(strconv.FormatInt(hi, 10))
	}
}

// plain drops the key orders decodeOrdered added.
func plain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k != orderKey {
				out[k] = plain(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}
