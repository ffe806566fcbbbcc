package jsonapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
)

// JSON strings are UTF-16 in their \u escapes: a character outside the
// Basic Multilingual Plane is a high surrogate escape followed by a low
// one. Half a pair names no character. encoding/json accepts it (as
// U+FFFD) and protojson refuses it, but with whatever its scanner met
// next: "unexpected EOF" when the string ends soon after, "invalid escape
// code" with the bytes that follow otherwise. loneSurrogate finds one
// first and says what it is and where.

// loneSurrogate returns an error naming the first \u escape in body that
// is half a surrogate pair, with the JSON path of the string that holds it
// and its byte offset, or nil. body must be one valid JSON value.
func loneSurrogate(body []byte) error {
	if !bytes.Contains(body, []byte(`\u`)) {
		return nil // the common body: nothing to walk
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var p jsonPath
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // not for this check to say: the decoder refuses it
		}
		s, isString := tok.(string)
		isKey := isString && p.atKey()
		if isString {
			raw := body[start:dec.InputOffset()]
			if at, esc, ok := findLoneSurrogate(raw); ok {
				where := fmt.Sprintf("at %q", p.String())
				switch {
				case isKey:
					where = "in a field name of " + p.parentName()
				case len(p) == 0:
					where = "at the body's top level"
				}
				return fmt.Errorf("invalid JSON string %s, offset %d: lone surrogate %s; a \\u escape of a "+
					"UTF-16 surrogate must be a high one (\\ud800-\\udbff) followed by a low one (\\udc00-\\udfff)",
					where, int(start)+at, esc)
			}
		}
		p.step(tok, s, isKey)
	}
}

// findLoneSurrogate returns the offset and text of the first \u escape in
// raw, the bytes of one JSON string token, that is half a surrogate pair.
func findLoneSurrogate(raw []byte) (int, string, bool) {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] != 'u' {
			i++ // \" \\ \n …: the escaped byte is no escape's start
			continue
		}
		r, ok := hexRune(raw, i)
		if !ok || !utf16.IsSurrogate(r) {
			i += 5
			continue
		}
		if low, ok := hexRune(raw, i+6); r < 0xdc00 && ok && low >= 0xdc00 && low <= 0xdfff {
			i += 11 // a whole pair
			continue
		}
		return i, string(raw[i : i+6]), true
	}
	return 0, "", false
}

// hexRune reads the \uXXXX escape at raw[i:].
func hexRune(raw []byte, i int) (rune, bool) {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}

// jsonPath is where a JSON decoder is: one frame per open object or array.
type jsonPath []pathFrame

type pathFrame struct {
	object  bool
	key     string // object: the field being read
	index   int    // array: the element being read
	wantKey bool   // object: the next string is a field name
}

// atKey reports whether the next string token is a field name.
func (p jsonPath) atKey() bool { return len(p) > 0 && p[len(p)-1].object && p[len(p)-1].wantKey }

// step moves past tok, a string s that is a field name when isKey.
func (p *jsonPath) step(tok json.Token, s string, isKey bool) {
	if isKey {
		top := &(*p)[len(*p)-1]
		top.key, top.wantKey = s, false
		return
	}
	switch tok {
	case json.Delim('{'):
		*p = append(*p, pathFrame{object: true, wantKey: true})
		return
	case json.Delim('['):
		*p = append(*p, pathFrame{})
		return
	case json.Delim('}'), json.Delim(']'):
		*p = (*p)[:len(*p)-1]
	}
	// A value ended: the enclosing object wants a field name, the array
	// its next element.
	if len(*p) > 0 {
		if top := &(*p)[len(*p)-1]; top.object {
			top.wantKey = true
		} else {
			top.index++
		}
	}
}

// String is the path as a client writes it: id.key, response.headers[1].value.
func (p jsonPath) String() string {
	var b bytes.Buffer
	for i, f := range p {
		switch {
		case !f.object:
			fmt.Fprintf(&b, "[%d]", f.index)
		case i > 0:
			b.WriteString("." + f.key)
		default:
			b.WriteString(f.key)
		}
	}
	return b.String()
}

// parentName names the object whose field name is being read.
func (p jsonPath) parentName() string {
	if len(p) <= 1 {
		return "the body"
	}
	return strconv.Quote(p[:len(p)-1].String())
}
