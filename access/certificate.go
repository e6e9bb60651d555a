package access

import "crypto/x509"

// CertificateIdentity names the caller a verified client certificate stands
// for: its first URI SAN (e.g. a SPIFFE ID), else its first DNS SAN, else its
// subject CommonName; "" if none. It is the name that Credentials.CertIdentity
// carries and that certificate rules match against, so it lives with those
// rules rather than with the TLS plumbing that verified the certificate.
func CertificateIdentity(cert *x509.Certificate) string {
	switch {
	case cert == nil:
		return ""
	case len(cert.URIs) > 0 && cert.URIs[0] != nil:
		return cert.URIs[0].String()
	case len(cert.DNSNames) > 0:
		return cert.DNSNames[0]
	}
	return cert.Subject.CommonName
}
