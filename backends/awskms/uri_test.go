//go:build !noawskms

package awskms

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

func TestParseURI(t *testing.T) {
	const (
		id       = "1234abcd-12ab-34cd-56ef-1234567890ab"
		keyARN   = "arn:aws:kms:eu-west-1:111122223333:key/" + id
		aliasARN = "arn:aws:kms:eu-west-1:111122223333:alias/cardsign/prod"
	)
	tests := []struct {
		uri     string
		want    keyRef
		wantErr string
	}{
		{uri: "awskms:///" + id, want: keyRef{id: id}},
		{uri: "AWSKMS:///" + id, want: keyRef{id: id}},
		{uri: "awskms:///mrk-1234abcd12ab34cd56ef1234567890ab", want: keyRef{id: "mrk-1234abcd12ab34cd56ef1234567890ab"}},
		{uri: "awskms:///" + keyARN, want: keyRef{id: keyARN, region: "eu-west-1"}},
		{uri: "awskms:///arn:aws-cn:kms:cn-north-1:111122223333:key/" + id, want: keyRef{id: "arn:aws-cn:kms:cn-north-1:111122223333:key/" + id, region: "cn-north-1"}},
		{uri: "awskms:///alias/cardsign", want: keyRef{id: "alias/cardsign", alias: true}},
		{uri: "awskms:///" + aliasARN, want: keyRef{id: aliasARN, region: "eu-west-1", alias: true}},
		{uri: "awskms:///" + keyARN + "?alg=PS256", want: keyRef{id: keyARN, region: "eu-west-1", alg: jose.PS256}},
		{uri: "awskms:///alias/a?alg=RS256", want: keyRef{id: "alias/a", alias: true, alg: jose.RS256}},

		{uri: "awskms:" + id, wantErr: "not an awskms:///"},
		{uri: "file:///" + id, wantErr: "not an awskms:///"},
		{uri: "awskms://eu-west-1/" + id, wantErr: "empty host"},
		{uri: "awskms:///", wantErr: "no key"},
		{uri: "awskms:///?alg=ES256", wantErr: "no key"},
		{uri: "awskms:///" + id + "?alg=es256", wantErr: "unsupported alg"},
		{uri: "awskms:///" + id + "?alg=ES256&alg=ES256", wantErr: "more than once"},
		{uri: "awskms:///" + id + "?region=eu-west-1", wantErr: `unknown query parameter "region"`},
		{uri: "awskms:///" + id + "?alg=%zz", wantErr: "malformed query"},
		{uri: "awskms:///key/" + id, wantErr: "invalid key ID"},
		{uri: "awskms:///" + id + "%2F", wantErr: "invalid key ID"},
		{uri: "awskms:///alias/", wantErr: "invalid alias"},
		{uri: "awskms:///alias/a b", wantErr: "invalid alias"},
		{uri: "awskms:///arn:aws:kms:eu-west-1:111122223333", wantErr: "malformed ARN"},
		{uri: "awskms:///arn:aws:s3:eu-west-1:111122223333:key/" + id, wantErr: "not a KMS key"},
		{uri: "awskms:///arn:aws:kms::111122223333:key/" + id, wantErr: "not a KMS key"},
		{uri: "awskms:///arn:aws:kms:eu-west-1:111122223333:grant/" + id, wantErr: "not key/ID or alias/NAME"},
		{uri: "awskms:///arn:aws:kms:eu-west-1:111122223333:key/", wantErr: "not key/ID or alias/NAME"},
	}
	for _, tt := range tests {
		got, err := parseURI(tt.uri)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("parseURI(%q) = %+v, %v; want %+v", tt.uri, got, err, tt.want)
			}
			continue
		}
		var ue *backends.URIError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("parseURI(%q) error %v, want a *backends.URIError mentioning %q", tt.uri, err, tt.wantErr)
		}
	}
}

func TestKeyURI(t *testing.T) {
	const keyARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	tests := []struct {
		alg  jose.Alg
		spec types.KeySpec
		want string
	}{
		{jose.ES256, types.KeySpecEccNistP256, "awskms:///" + keyARN},
		{jose.RS256, types.KeySpecRsa3072, "awskms:///" + keyARN},
		{jose.PS256, types.KeySpecRsa3072, "awskms:///" + keyARN + "?alg=PS256"},
		{jose.EdDSA, types.KeySpecEccNistEdwards25519, "awskms:///" + keyARN},
	}
	for _, tt := range tests {
		got := keyURI(keyARN, tt.alg, tt.spec)
		if got != tt.want {
			t.Errorf("keyURI(%s, %s) = %q, want %q", tt.alg, tt.spec, got, tt.want)
		}
		ref, err := parseURI(got)
		if err != nil || ref.id != keyARN || (ref.alg != "" && ref.alg != tt.alg) {
			t.Errorf("keyURI(%s, %s) = %q does not parse back: %+v, %v", tt.alg, tt.spec, got, ref, err)
		}
	}
}
