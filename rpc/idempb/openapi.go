package idempb

import _ "embed"

// OpenAPI is the JSON API's OpenAPI v2 document, generated with the gateway
// from idem.proto and idem_http.yaml (scripts/genproto.sh).
//
//go:embed idem.swagger.json
var OpenAPI []byte
