package idemhttp

import (
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
	v, err := oneValue(values)
	if err != nil {
		return "", err
	}
	v = strings.Trim(v, " \t")
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

// senderKey reads a webhook sender's event id from its header as sent:
// the receiver's code reads the same header byte for byte, so quotes and
// whitespace are part of the id, not syntax to strip.
func senderKey(values []string, maxLen int) (string, error) {
	v, err := oneValue(values)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", errors.New("the key is empty")
	}
	return v, checkKey(v, maxLen)
}

// oneValue is the header's one value; errMissingKey without one.
func oneValue(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", errMissingKey
	case 1:
		return values[0], nil
	default:
		return "", fmt.Errorf("the header appears %d times", len(values))
	}
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
