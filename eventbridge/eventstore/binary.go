package eventstore

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// EncodeBinary returns the stored form of a binary-mode CloudEvent 1.0
// given by the headers and body of its HTTP request, with the request's
// trace context, when every attribute of it
// is plainly valid: the same headers as sdk-go's binding.ToEvent, the
// event's Validate and Encode give it, for a fraction of their work. When
// it reports false, the request is to go that way, which accepts it or
// says why not: EncodeBinary leaves to it anything out of the plain, valid
// or not (another specversion, a dataschema, a value with a control
// character or outside ASCII, a source that is more than a plain path or
// URL, a media type with parameters, a header name sdk-go reads otherwise
// than Go's canonical form). FuzzEncodeBinary holds it to that path.
//
// Why: sdk-go reads each header into an event field by field, validates
// the event (formatting its source URL anew at each look), and Encode
// writes it back into headers; for the event bridge's 1 KiB events that
// was most of the publisher's own work (issue 20's profiles).
func EncodeBinary(h http.Header, body []byte, traceParent, traceState string) (Event, bool) {
	stored, ok := encodeBinary(h, traceParent, traceState)
	if !ok {
		return Event{}, false
	}
	return Event{h: stored, data: body}, true
}

// encodeBinary is EncodeBinary's headers, one by one.
func encodeBinary(h http.Header, traceParent, traceState string) (nats.Header, bool) {
	if v := h["Ce-Specversion"]; len(v) == 0 || v[0] != "1.0" {
		return nil, false
	}
	out := make(nats.Header, len(h)+2)
	values := make([]string, 0, len(h)+2)
	set := func(key, value string) {
		values = append(values, value)
		out[key] = values[len(values)-1 : len(values) : len(values)]
	}
	traceExtension := false
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		if !strings.HasPrefix(k, "Ce-") {
			if k == "Content-Type" {
				if !plainMediaType(v[0]) {
					return nil, false
				}
				set(HeaderContentType, v[0])
				continue
			}
			if strings.EqualFold(k, "Content-Type") || len(k) >= 3 && strings.EqualFold(k[:3], "ce-") {
				return nil, false // not canonical: sdk-go reads it otherwise
			}
			continue
		}
		name := k[3:]
		value := v[0]
		if !plainValue(value) {
			return nil, false
		}
		switch name {
		case "Specversion":
			set(HeaderPrefix+"specversion", value)
		case "Id", "Type", "Subject":
			if strings.TrimSpace(value) != value || value == "" {
				return nil, false
			}
			set(plainAttributes[name], value)
		case "Source":
			source, ok := plainSource(value)
			if !ok {
				return nil, false
			}
			set(HeaderPrefix+"source", source)
		case "Time":
			t, err := types.ParseTime(value)
			if err != nil {
				return nil, false
			}
			if !t.IsZero() {
				set(HeaderPrefix+"time", types.FormatTime(t))
			}
		default:
			ext, ok := extensionName(name)
			if !ok {
				return nil, false
			}
			if ext == HeaderTraceParent {
				traceExtension = true
			}
			set(HeaderPrefix+ext, value)
		}
	}
	for _, required := range []string{"ce-id", "ce-source", "ce-type"} {
		if _, ok := out[required]; !ok {
			return nil, false
		}
	}
	if !traceExtension && storableTraceParent(traceParent) {
		set(HeaderTraceParent, traceParent)
		if storableTraceState(traceState) {
			set(HeaderTraceState, traceState)
		}
	}
	return out, true
}

// plainAttributes are the stored names of the attributes that are strings.
var plainAttributes = map[string]string{"Id": HeaderPrefix + "id", "Type": HeaderPrefix + "type", "Subject": HeaderPrefix + "subject"}

// plainValue reports whether an attribute's value is printable ASCII.
func plainValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// plainSource returns a source as sdk-go stores it (the URL it parses to,
// formatted), when it is a plain path or a plain absolute URL.
func plainSource(s string) (string, bool) {
	if s == "" || strings.TrimSpace(s) != s || strings.HasPrefix(s, "//") {
		return "", false
	}
	plain := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~' || c == '/') {
			plain = false
			break
		}
	}
	if plain {
		return s, true // a relative reference that formats as itself
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false
	}
	formatted := u.String()
	return formatted, formatted != ""
}

// plainMediaType reports whether a Content-Type is a plain type/subtype,
// which mime.ParseMediaType (sdk-go's check) takes as it is, and not one
// of a structured-mode event (application/cloudevents+json).
func plainMediaType(s string) bool {
	slash := strings.IndexByte(s, '/')
	if slash <= 0 || slash == len(s)-1 || format.Lookup(s) != nil {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i != slash && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+') {
			return false
		}
	}
	return true
}

// extensionName returns the name of the extension a header Ce-<name>
// names, as sdk-go reads it (its letters in lower case), when it is a
// valid extension name that names no attribute of the specification.
func extensionName(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", false
		}
	}
	ext := strings.ToLower(name)
	switch ext {
	case "id", "source", "type", "datacontenttype", "subject", "time", "specversion", "dataschema", "data":
		return "", false
	}
	return ext, true
}
