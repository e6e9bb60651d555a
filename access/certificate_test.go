package access

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
)

func TestCertificateIdentity(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		cert *x509.Certificate
		want string
	}{
		{"URI over DNS and CN", &x509.Certificate{
			URIs:     []*url.URL{u("spiffe://example.org/ci/team-a"), u("spiffe://example.org/other")},
			DNSNames: []string{"a.example.org"}, Subject: pkix.Name{CommonName: "cn"}}, "spiffe://example.org/ci/team-a"},
		{"DNS over CN", &x509.Certificate{DNSNames: []string{"a.example.org", "b.example.org"}, Subject: pkix.Name{CommonName: "cn"}}, "a.example.org"},
		{"CN", &x509.Certificate{Subject: pkix.Name{CommonName: "cn"}}, "cn"},
		{"empty", &x509.Certificate{}, ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CertificateIdentity(tt.cert); got != tt.want {
				t.Errorf("CertificateIdentity = %q, want %q", got, tt.want)
			}
		})
	}
}
