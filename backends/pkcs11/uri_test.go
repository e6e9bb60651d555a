//go:build cgo && !nopkcs11

package pkcs11

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/backends"
	pkcs11uri "github.com/stefanberger/go-pkcs11uri"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		name      string
		uri       string
		token     map[string]string
		object    string // "-" for none
		id        []byte
		module    string
		pin       string // "-" for none
		pinSource string
		err       string // substring of the *URIError reason
	}{
		// RFC 7512 §3, in its order. Those that name no private key are
		// refused with a reason; the rest parse to what they say.
		{name: "§3 empty", uri: "pkcs11:", object: "-", pin: "-"},
		{name: "§3 public key", uri: "pkcs11:object=my-pubkey;type=public", err: "type=public"},
		{name: "§3 pin-source", uri: "pkcs11:object=my-key;type=private?pin-source=file:/etc/token",
			object: "my-key", pin: "-", pinSource: "file:/etc/token"},
		{name: "§3 certificate", uri: "pkcs11:token=The%20Software%20PKCS%2311%20Softtoken;manufacturer=Snake%20Oil,%20Inc.;model=1.0;object=my-certificate;type=cert;id=%69%95%3E%5C%F4%BD%EC%91;serial=?pin-source=file:/etc/token_pin",
			err: "type=cert"},
		{name: "§3 certificate example as a private key", uri: "pkcs11:token=The%20Software%20PKCS%2311%20Softtoken;manufacturer=Snake%20Oil,%20Inc.;model=1.0;object=my-certificate;type=private;id=%69%95%3E%5C%F4%BD%EC%91;serial=?pin-source=file:/etc/token_pin",
			token:  map[string]string{"token": "The Software PKCS#11 Softtoken", "manufacturer": "Snake Oil, Inc.", "model": "1.0", "serial": ""},
			object: "my-certificate", id: []byte{0x69, 0x95, 0x3E, 0x5C, 0xF4, 0xBD, 0xEC, 0x91}, pin: "-", pinSource: "file:/etc/token_pin"},
		{name: "§3 module-name", uri: "pkcs11:object=my-sign-key;type=private?module-name=mypkcs11", err: "module-name is not supported"},
		{name: "§3 module-path", uri: "pkcs11:object=my-sign-key;type=private?module-path=/mnt/libmypkcs11.so.1",
			object: "my-sign-key", module: "/mnt/libmypkcs11.so.1", pin: "-"},
		{name: "§3 pin-value", uri: "pkcs11:token=Software%20PKCS%2311%20softtoken;manufacturer=Snake%20Oil,%20Inc.?pin-value=the-pin",
			token: map[string]string{"token": "Software PKCS#11 softtoken", "manufacturer": "Snake Oil, Inc."}, object: "-", pin: "the-pin"},
		{name: "§3 slot-description", uri: "pkcs11:slot-description=Sun%20Metaslot",
			token: map[string]string{"slot-description": "Sun Metaslot"}, object: "-", pin: "-"},
		{name: "§3 library", uri: "pkcs11:library-manufacturer=Snake%20Oil,%20Inc.;library-description=Soft%20Token%20Library;library-version=1.23",
			token: map[string]string{"library-manufacturer": "Snake Oil, Inc.", "library-description": "Soft Token Library", "library-version": "1.23"}, object: "-", pin: "-"},
		{name: "§3 pct-encoded id", uri: "pkcs11:token=My%20token%25%20created%20by%20Joe;library-version=3;id=%01%02%03%Ba%dd%Ca%fe%04%05%06",
			token: map[string]string{"token": "My token% created by Joe", "library-version": "3"}, object: "-",
			id: []byte{1, 2, 3, 0xBA, 0xDD, 0xCA, 0xFE, 4, 5, 6}, pin: "-"},
		{name: "§3 %; in token", uri: "pkcs11:token=A%20name%20with%20a%20substring%20%25%3B;object=my-certificate;type=cert", err: "type=cert"},
		{name: "§3 %; in token, private", uri: "pkcs11:token=A%20name%20with%20a%20substring%20%25%3B;object=my-certificate",
			token: map[string]string{"token": "A name with a substring %;"}, object: "my-certificate", pin: "-"},
		{name: "§3 UTF-8", uri: "pkcs11:token=Name%20with%20a%20small%20A%20with%20acute:%20%C3%A1;object=my-certificate;type=cert", err: "type=cert"},
		{name: "§3 UTF-8, private", uri: "pkcs11:token=Name%20with%20a%20small%20A%20with%20acute:%20%C3%A1;object=k",
			token: map[string]string{"token": "Name with a small A with acute: á"}, object: "k", pin: "-"},
		{name: "§3 vendor attributes", uri: "pkcs11:token=my-token;object=my-certificate;type=cert;vendor-aaa=value-a?pin-source=file:/etc/token_pin&vendor-bbb=value-b",
			err: `"vendor-aaa"`},
		{name: "§3 vendor query attribute only", uri: "pkcs11:token=my-token;object=k?vendor-bbb=value-b",
			token: map[string]string{"token": "my-token"}, object: "k", pin: "-"},

		// Ours.
		{name: "upper-case scheme", uri: "PKCS11:token=t;object=k;slot-id=007", token: map[string]string{"token": "t", "slot-id": "7"}, object: "k", pin: "-"},
		{name: "empty object", uri: "pkcs11:object=", object: "", pin: "-"},
		{name: "bad slot-id", uri: "pkcs11:slot-id=x", err: "slot-id"},
		{name: "both PINs", uri: "pkcs11:object=k?pin-value=a&pin-source=/p", err: "pin-source and pin-value"},
		{name: "relative module-path", uri: "pkcs11:object=k?module-path=lib.so", err: "absolute"},
		{name: "duplicate attribute", uri: "pkcs11:object=a;object=b", err: "duplicate"},
		{name: "no value", uri: "pkcs11:object", err: "malformed"},
		{name: "bad escape in path", uri: "pkcs11:object=%zz", err: "malformed"},
		{name: "bad escape in PIN", uri: "pkcs11:object=k?pin-value=12%zz34", err: "pin-value is not validly"},
		{name: "other scheme", uri: "file:/k.pem", err: "not a pkcs11: URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := parseURI(tt.uri)
			if tt.err != "" {
				var ue *backends.URIError
				if !errors.As(err, &ue) || !strings.Contains(ue.Reason, tt.err) {
					t.Fatalf("parseURI(%q) = %v, want *URIError mentioning %q", tt.uri, err, tt.err)
				}
				if strings.Contains(err.Error(), "12%zz34") || strings.Contains(err.Error(), "the-pin") {
					t.Errorf("error shows the PIN: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseURI(%q): %v", tt.uri, err)
			}
			want := tt.token
			if want == nil {
				want = map[string]string{}
			}
			if !maps.Equal(k.token, want) {
				t.Errorf("token attributes %v, want %v", k.token, want)
			}
			if got := map[bool]string{true: k.object, false: "-"}[k.hasObject]; got != tt.object {
				t.Errorf("object %q, want %q", got, tt.object)
			}
			if k.hasID != (tt.id != nil) || !bytes.Equal(k.id, tt.id) {
				t.Errorf("id %x (%v), want %x", k.id, k.hasID, tt.id)
			}
			if k.module != tt.module {
				t.Errorf("module %q, want %q", k.module, tt.module)
			}
			if got := map[bool]string{true: k.pin, false: "-"}[k.hasPIN]; got != tt.pin {
				t.Errorf("pin %q, want %q", got, tt.pin)
			}
			if k.pinSource != tt.pinSource {
				t.Errorf("pin-source %q, want %q", k.pinSource, tt.pinSource)
			}
		})
	}
}

func TestRedactURI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pkcs11:token=t;object=k", "pkcs11:token=t;object=k"},
		{"pkcs11:token=t;object=k?pin-value=1234", "pkcs11:token=t;object=k?…"},
		{"pkcs11:token=t;pin-value=1234;object=k", "pkcs11:…"},
		{"pkcs11:token=t;PIN-VALUE=1234?module-path=/m.so", "pkcs11:…?…"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFormatURI checks that Create's URIs parse back, with go-pkcs11uri and
// ourselves, to what went in, whatever bytes the label and id hold.
func TestFormatURI(t *testing.T) {
	tests := []struct {
		token, object string
		id            []byte
		module        string
		want          string
	}{
		{"tok", "key", []byte{0xAB, 0x01}, "", "pkcs11:token=tok;object=key;id=%AB%01"},
		{"my token", "a;b?c%d/é", []byte("id"), "/opt/hsm lib/p11.so", "pkcs11:token=my%20token;object=a%3Bb%3Fc%25d%2F%C3%A9;id=%69%64?module-path=/opt/hsm%20lib/p11.so"},
	}
	for _, tt := range tests {
		got := formatURI(tt.token, tt.object, tt.id, tt.module)
		if got != tt.want {
			t.Errorf("formatURI = %s, want %s", got, tt.want)
		}
		u := pkcs11uri.New()
		if err := u.Parse(got); err != nil {
			t.Errorf("go-pkcs11uri: %v", err)
		}
		k, err := parseURI(got)
		if err != nil {
			t.Fatalf("parseURI(%s): %v", got, err)
		}
		if k.token["token"] != tt.token || k.object != tt.object || !bytes.Equal(k.id, tt.id) || k.module != tt.module {
			t.Errorf("%s parses to token %q object %q id %x module %q", got, k.token["token"], k.object, k.id, k.module)
		}
	}
}
