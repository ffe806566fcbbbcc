package idemhttp

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string
		err    string // "" for success; errMissingKey as "missing"
	}{
		{"missing", nil, "", "missing"},
		{"bare", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324", ""},
		{"sf-string", []string{`"8e03978e-40d5"`}, "8e03978e-40d5", ""},
		{"sf-string escapes", []string{`"a\"b\\c"`}, `a"b\c`, ""},
		{"surrounding space", []string{"  k1\t"}, "k1", ""},
		{"inner space", []string{"a b"}, "a b", ""},
		{"max length", []string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), ""},
		{"too long", []string{strings.Repeat("k", 256)}, "", "longer than 255"},
		{"quoted too long", []string{`"` + strings.Repeat("k", 256) + `"`}, "", "longer than 255"},
		{"twice", []string{"a", "b"}, "", "appears 2 times"},
		{"empty", []string{""}, "", "empty"},
		{"empty quoted", []string{`""`}, "", "empty"},
		{"unterminated", []string{`"abc`}, "", "unterminated"},
		{"after quote", []string{`"abc";x=1`}, "", "after the quoted key"},
		{"bad escape", []string{`"a\qb"`}, "", "bad escape"},
		{"non-ASCII", []string{"clé"}, "", "not printable ASCII"},
		{"control", []string{"a\x01b"}, "", "not printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKey(tc.values, 255)
			switch {
			case tc.err == "missing":
				if !errors.Is(err, errMissingKey) {
					t.Errorf("parseKey(%q) = %q, %v; want errMissingKey", tc.values, got, err)
				}
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("parseKey(%q) = %q, %v; want an error containing %q", tc.values, got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Errorf("parseKey(%q) = %q, %v; want %q", tc.values, got, err, tc.want)
			}
		})
	}
}
