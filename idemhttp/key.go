package idemhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// errMissingKey: the request has no Idempotency-Key.
var errMissingKey = errors.New("missing")

// parseKey reads the key from the header's values. The draft defines the
// field as a Structured Field string ("…"); many clients send the bare
// value, so both are accepted. The key must be 1 to maxLen bytes of
// printable ASCII.
func parseKey(values []string, maxLen int) (string, error) {
	switch len(values) {
	case 0:
		return "", errMissingKey
	case 1:
	default:
		return "", fmt.Errorf("the header appears %d times", len(values))
	}
	v := strings.Trim(values[0], " \t")
	if strings.HasPrefix(v, `"`) {
		var err error
		if v, err = parseSFString(v); err != nil {
			return "", err
		}
	}
	if v == "" {
		return "", errors.New("the key is empty")
	}
	return v, checkKey(v, maxLen)
}

// checkKey refuses a key that is not 1 to maxLen bytes of printable ASCII,
// wherever it came from.
func checkKey(v string, maxLen int) error {
	if len(v) > maxLen {
		return fmt.Errorf("the key is %d bytes, longer than %d", len(v), maxLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("byte %d of the key is 0x%02x, not printable ASCII", i, c)
		}
	}
	return nil
}

// errBodyNotJSON: the key is a field of the body, and the body is not one
// JSON value.
var errBodyNotJSON = errors.New("the body is not JSON")

// fieldKey reads the key from the field p names in a JSON body. A string
// is the key as it is; a number is its literal text (an event id 42 is
// the key "42"). An absent field, null and "" are errMissingKey.
func fieldKey(body []byte, p Pointer, maxLen int) (string, error) {
	doc, ok := decodeJSON(body)
	if !ok {
		return "", errBodyNotJSON
	}
	v, found := p.lookup(doc)
	var key string
	switch v := v.(type) {
	case nil:
		found = false
	case string:
		key = v
	case json.Number:
		key = v.String()
	case bool:
		return "", fmt.Errorf("%s is a boolean, not a string or a number", p)
	case map[string]any:
		return "", fmt.Errorf("%s is an object, not a string or a number", p)
	case []any:
		return "", fmt.Errorf("%s is an array, not a string or a number", p)
	}
	if !found || key == "" {
		return "", errMissingKey
	}
	if err := checkKey(key, maxLen); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return key, nil
}

// parseSFString decodes an RFC 9651 sf-string: printable ASCII between
// double quotes, with \" and \\ as the only escapes, and nothing after.
func parseSFString(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", errors.New("bad escape in the quoted key")
			}
			i++
			b.WriteByte(s[i])
		case c == '"':
			if i != len(s)-1 {
				return "", errors.New("text after the quoted key")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("byte 0x%02x in the quoted key", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated quoted key")
}
