package awskmsfake

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const testAuth = "AWS4-HMAC-SHA256 Credential=AKIAFAKETEST/20260101/us-east-1/kms/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=00ff"

// request is one raw KMS request; the zero header fields get valid values.
type request struct {
	method, target, contentType, auth, date string
	body                                    string
}

// response is a decoded answer.
type response struct {
	status int
	typ    string         // __type of an error
	body   map[string]any // the JSON body
	raw    string
}

func do(t *testing.T, s *Server, r request) response {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.contentType == "" {
		r.contentType = "application/x-amz-json-1.1"
	}
	if r.auth == "" {
		r.auth = testAuth
	}
	if r.date == "" {
		r.date = "20260101T000000Z"
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, s.URL()+"/", strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.target != "" {
		req.Header.Set("X-Amz-Target", "TrentService."+r.target)
	}
	req.Header.Set("Content-Type", r.contentType)
	if r.auth != "-" {
		req.Header.Set("Authorization", r.auth)
	}
	if r.date != "-" {
		req.Header.Set("X-Amz-Date", r.date)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		t.Errorf("response Content-Type %q", ct)
	}
	out := response{status: resp.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		t.Fatalf("response is not JSON: %q", raw)
	}
	out.typ, _ = out.body["__type"].(string)
	return out
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustKey(t *testing.T, s *Server, spec string) string {
	t.Helper()
	keyARN, err := s.CreateKey(spec)
	if err != nil {
		t.Fatal(err)
	}
	return keyARN
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStartOptions(t *testing.T) {
	tests := []struct {
		opts    Options
		wantErr string
	}{
		{Options{Addr: "0.0.0.0:0"}, "not a loopback"},
		{Options{Addr: "192.0.2.1:0"}, "not a loopback"},
		{Options{Addr: "nonsense"}, "listen address"},
		{Options{ThrottleRate: 1.5}, "throttle rate"},
		{Options{ThrottleRate: -0.1}, "throttle rate"},
		{Options{SignQuota: -1}, "sign quota"},
		{Options{SignQuota: 10, SignBurst: -1}, "sign quota"},
	}
	for _, tt := range tests {
		s, err := Start(tt.opts)
		if err == nil {
			_ = s.Close()
			t.Errorf("Start(%+v) succeeded", tt.opts)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Start(%+v): %v, want %q", tt.opts, err, tt.wantErr)
		}
	}
	s := start(t, Options{Addr: "localhost:0", Region: "eu-west-1", Account: "444455556666"})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q", s.URL())
	}
	if keyARN := mustKey(t, s, "ECC_NIST_P256"); !strings.HasPrefix(keyARN, "arn:aws:kms:eu-west-1:444455556666:key/") {
		t.Errorf("key ARN %q does not use the configured Region and account", keyARN)
	}
}

// TestProtocol checks the JSON 1.1 envelope: target, content type, SigV4
// header presence, and error shapes. Header values never come back.
func TestProtocol(t *testing.T) {
	s := start(t, Options{})
	keyARN := mustKey(t, s, "ECC_NIST_P256")
	describe := jsonBody(map[string]string{"KeyId": keyARN})
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantType   string
	}{
		{"valid", request{target: "DescribeKey", body: describe}, 200, ""},
		{"no target", request{body: describe}, 400, "UnknownOperationException"},
		{"unknown operation", request{target: "Encrypt", body: describe}, 400, "UnknownOperationException"},
		{"GET", request{method: http.MethodGet, target: "DescribeKey"}, 404, "UnknownOperationException"},
		{"JSON 1.0 content type", request{target: "DescribeKey", contentType: "application/x-amz-json-1.0", body: describe}, 400, "SerializationException"},
		{"no Authorization", request{target: "DescribeKey", auth: "-", body: describe}, 400, "MissingAuthenticationTokenException"},
		{"basic auth", request{target: "DescribeKey", auth: "Basic QUtJQUZBS0VURVNUOng=", body: describe}, 400, "IncompleteSignatureException"},
		{"SigV4 without Signature", request{target: "DescribeKey", auth: "AWS4-HMAC-SHA256 Credential=AKIAFAKETEST/x, SignedHeaders=host", body: describe}, 400, "IncompleteSignatureException"},
		{"no X-Amz-Date", request{target: "DescribeKey", date: "-", body: describe}, 400, "IncompleteSignatureException"},
		{"malformed JSON", request{target: "DescribeKey", body: "{"}, 400, "SerializationException"},
		{"wrong member type", request{target: "DescribeKey", body: `{"KeyId": 7}`}, 400, "SerializationException"},
		{"no KeyId", request{target: "DescribeKey", body: `{}`}, 400, "ValidationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, s, tt.req)
			if r.status != tt.wantStatus || r.typ != tt.wantType {
				t.Errorf("got %d %q (%s), want %d %q", r.status, r.typ, r.raw, tt.wantStatus, tt.wantType)
			}
			if tt.wantType != "" {
				if msg, _ := r.body["message"].(string); msg == "" {
					t.Errorf("error without a message: %s", r.raw)
				}
			}
			if strings.Contains(r.raw, "AKIAFAKETEST") || strings.Contains(r.raw, "QUtJQUZBS0VURVNU") {
				t.Errorf("response echoes the Authorization header: %s", r.raw)
			}
		})
	}
	if n := s.Calls("DescribeKey"); n != 4 { // valid, malformed JSON, wrong type, no KeyId
		t.Errorf("Calls(DescribeKey) = %d, want 4 (only authorized requests count)", n)
	}
}

// TestSign signs with every algorithm the fake implements and verifies with
// the public key from GetPublicKey, in RAW and DIGEST mode.
func TestSign(t *testing.T) {
	s := start(t, Options{})
	keys := map[string]string{}
	for _, spec := range []string{"ECC_NIST_P256", "ECC_NIST_P384", "ECC_NIST_P521", "RSA_2048", "ECC_NIST_EDWARDS25519"} {
		keys[spec] = mustKey(t, s, spec)
	}
	msg := []byte("eyJhbGciOiJFUzI1NiJ9.eyJuYW1lIjoiYWdlbnQifQ")
	tests := []struct {
		spec, alg, msgType string
		verify             func(pub crypto.PublicKey, sig []byte) bool
	}{
		{"ECC_NIST_P256", "ECDSA_SHA_256", "RAW", func(pub crypto.PublicKey, sig []byte) bool {
			d := sha256.Sum256(msg)
			return ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d[:], sig)
		}},
		{"ECC_NIST_P384", "ECDSA_SHA_384", "DIGEST", func(pub crypto.PublicKey, sig []byte) bool {
			d := sha512.Sum384(msg)
			return ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d[:], sig)
		}},
		{"ECC_NIST_P521", "ECDSA_SHA_512", "DIGEST", func(pub crypto.PublicKey, sig []byte) bool {
			d := sha512.Sum512(msg)
			return ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d[:], sig)
		}},
		{"RSA_2048", "RSASSA_PKCS1_V1_5_SHA_256", "DIGEST", func(pub crypto.PublicKey, sig []byte) bool {
			d := sha256.Sum256(msg)
			return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, d[:], sig) == nil
		}},
		{"RSA_2048", "RSASSA_PSS_SHA_256", "RAW", func(pub crypto.PublicKey, sig []byte) bool {
			d := sha256.Sum256(msg)
			return rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, d[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}},
		{"RSA_2048", "RSASSA_PSS_SHA_512", "DIGEST", func(pub crypto.PublicKey, sig []byte) bool {
			d := sha512.Sum512(msg)
			return rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA512, d[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}},
		{"ECC_NIST_EDWARDS25519", "ED25519_SHA_512", "RAW", func(pub crypto.PublicKey, sig []byte) bool {
			return ed25519.Verify(pub.(ed25519.PublicKey), msg, sig)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.alg+"/"+tt.msgType, func(t *testing.T) {
			keyARN := keys[tt.spec]
			pk := do(t, s, request{target: "GetPublicKey", body: jsonBody(map[string]string{"KeyId": keyARN})})
			if pk.status != 200 || pk.body["KeyId"] != keyARN || pk.body["KeySpec"] != tt.spec || pk.body["KeyUsage"] != "SIGN_VERIFY" {
				t.Fatalf("GetPublicKey: %s", pk.raw)
			}
			der, _ := base64.StdEncoding.DecodeString(pk.body["PublicKey"].(string))
			pub, err := x509.ParsePKIXPublicKey(der)
			if err != nil {
				t.Fatal(err)
			}
			in := msg
			if tt.msgType == "DIGEST" {
				h := algHash(tt.alg).New()
				h.Write(msg)
				in = h.Sum(nil)
			}
			r := do(t, s, request{target: "Sign", body: jsonBody(map[string]string{
				"KeyId": keyARN, "Message": b64(in), "MessageType": tt.msgType, "SigningAlgorithm": tt.alg,
			})})
			if r.status != 200 || r.body["KeyId"] != keyARN || r.body["SigningAlgorithm"] != tt.alg {
				t.Fatalf("Sign: %s", r.raw)
			}
			sig, _ := base64.StdEncoding.DecodeString(r.body["Signature"].(string))
			if !tt.verify(pub, sig) {
				t.Error("signature does not verify")
			}
		})
	}
}

// TestErrors checks the error each refusal gets.
func TestErrors(t *testing.T) {
	s := start(t, Options{})
	ec := mustKey(t, s, "ECC_NIST_P256")
	ed := mustKey(t, s, "ECC_NIST_EDWARDS25519")
	sym := mustKey(t, s, "SYMMETRIC_DEFAULT")
	off := mustKey(t, s, "ECC_NIST_P256")
	if err := s.DisableKey(off); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAlias("alias/ec", ec); err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("x"))
	sign := func(key, alg, msgType string, msg []byte) string {
		return jsonBody(map[string]string{"KeyId": key, "Message": b64(msg), "MessageType": msgType, "SigningAlgorithm": alg})
	}
	missing := "arn:aws:kms:us-east-1:111122223333:key/0badc0de-0000-4000-8000-000000000000"
	tests := []struct {
		name, op, body, wantType string
	}{
		{"sign missing key", "Sign", sign(missing, "ECDSA_SHA_256", "DIGEST", digest[:]), "NotFoundException"},
		{"sign other Region", "Sign", sign(strings.Replace(ec, "us-east-1", "eu-west-1", 1), "ECDSA_SHA_256", "DIGEST", digest[:]), "NotFoundException"},
		{"sign bad ARN", "Sign", sign("arn:aws:s3:::bucket", "ECDSA_SHA_256", "DIGEST", digest[:]), "InvalidArnException"},
		{"sign disabled", "Sign", sign(off, "ECDSA_SHA_256", "DIGEST", digest[:]), "DisabledException"},
		{"sign symmetric", "Sign", sign(sym, "ECDSA_SHA_256", "DIGEST", digest[:]), "InvalidKeyUsageException"},
		{"sign wrong algorithm", "Sign", sign(ec, "ECDSA_SHA_384", "DIGEST", make([]byte, 48)), "InvalidKeyUsageException"},
		{"sign short digest", "Sign", sign(ec, "ECDSA_SHA_256", "DIGEST", digest[:31]), "ValidationException"},
		{"sign 4097 bytes", "Sign", sign(ed, "ED25519_SHA_512", "RAW", make([]byte, 4097)), "ValidationException"},
		{"Ed25519 digest", "Sign", sign(ed, "ED25519_SHA_512", "DIGEST", make([]byte, 64)), "ValidationException"},
		{"public key of disabled", "GetPublicKey", jsonBody(map[string]string{"KeyId": off}), "DisabledException"},
		{"public key of symmetric", "GetPublicKey", jsonBody(map[string]string{"KeyId": sym}), "UnsupportedOperationException"},
		{"describe missing alias", "DescribeKey", jsonBody(map[string]string{"KeyId": "alias/nope"}), "NotFoundException"},
		{"create EC without usage", "CreateKey", jsonBody(map[string]string{"KeySpec": "ECC_NIST_P256"}), "ValidationException"},
		{"create unknown spec", "CreateKey", jsonBody(map[string]string{"KeySpec": "ECC_SECG_P256K1", "KeyUsage": "SIGN_VERIFY"}), "ValidationException"},
		{"create symmetric for signing", "CreateKey", jsonBody(map[string]string{"KeySpec": "SYMMETRIC_DEFAULT", "KeyUsage": "SIGN_VERIFY"}), "ValidationException"},
		{"alias exists", "CreateAlias", jsonBody(map[string]string{"AliasName": "alias/ec", "TargetKeyId": ed}), "AlreadyExistsException"},
		{"alias without prefix", "CreateAlias", jsonBody(map[string]string{"AliasName": "ec2", "TargetKeyId": ed}), "ValidationException"},
		{"AWS alias", "CreateAlias", jsonBody(map[string]string{"AliasName": "alias/aws/x", "TargetKeyId": ed}), "NotAuthorizedException"},
		{"alias to alias", "CreateAlias", jsonBody(map[string]string{"AliasName": "alias/x", "TargetKeyId": "alias/ec"}), "NotFoundException"},
		{"update missing alias", "UpdateAlias", jsonBody(map[string]string{"AliasName": "alias/nope", "TargetKeyId": ed}), "NotFoundException"},
		{"update alias to symmetric", "UpdateAlias", jsonBody(map[string]string{"AliasName": "alias/ec", "TargetKeyId": sym}), "ValidationException"},
		{"disable by alias", "DisableKey", jsonBody(map[string]string{"KeyId": "alias/ec"}), "NotFoundException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, s, request{target: tt.op, body: tt.body})
			if r.status != 400 || r.typ != tt.wantType {
				t.Errorf("got %d %q (%s), want 400 %q", r.status, r.typ, r.raw, tt.wantType)
			}
		})
	}
	if s.Disabled(ec) {
		t.Error("DisableKey by alias disabled the key")
	}
}

// TestAliasesAndDisable: aliases resolve everywhere KMS allows them, move
// with UpdateAlias, and DisableKey is recorded.
func TestAliasesAndDisable(t *testing.T) {
	s := start(t, Options{})
	a, b := mustKey(t, s, "ECC_NIST_P256"), mustKey(t, s, "ECC_NIST_P256")
	r := do(t, s, request{target: "CreateAlias", body: jsonBody(map[string]string{"AliasName": "alias/signing", "TargetKeyId": a})})
	if r.status != 200 {
		t.Fatalf("CreateAlias: %s", r.raw)
	}
	for _, ref := range []string{"alias/signing", "arn:aws:kms:us-east-1:111122223333:alias/signing", a, a[strings.LastIndexByte(a, '/')+1:]} {
		d := do(t, s, request{target: "DescribeKey", body: jsonBody(map[string]string{"KeyId": ref})})
		md, _ := d.body["KeyMetadata"].(map[string]any)
		if md["Arn"] != a || md["KeyState"] != "Enabled" || md["Enabled"] != true || md["KeyUsage"] != "SIGN_VERIFY" {
			t.Errorf("DescribeKey(%s): %s", ref, d.raw)
		}
	}
	r = do(t, s, request{target: "UpdateAlias", body: jsonBody(map[string]string{"AliasName": "alias/signing", "TargetKeyId": b})})
	if target, _ := s.AliasTarget("alias/signing"); r.status != 200 || target != b {
		t.Fatalf("UpdateAlias: %s; alias points to %s", r.raw, target)
	}
	r = do(t, s, request{target: "DisableKey", body: jsonBody(map[string]string{"KeyId": b})})
	if r.status != 200 || !s.Disabled(b) || !s.Disabled("alias/signing") || s.Disabled(a) {
		t.Fatalf("DisableKey: %s; disabled a=%v b=%v", r.raw, s.Disabled(a), s.Disabled(b))
	}
	if ki, _ := s.Key(b); ki.Enabled {
		t.Error("disabled key still enabled")
	}
	d := do(t, s, request{target: "DescribeKey", body: jsonBody(map[string]string{"KeyId": b})})
	if md, _ := d.body["KeyMetadata"].(map[string]any); md["KeyState"] != "Disabled" || md["Enabled"] != false {
		t.Errorf("DescribeKey of a disabled key: %s", d.raw)
	}
}

// TestFaults checks each injected fault and that they can be turned off.
func TestFaults(t *testing.T) {
	s := start(t, Options{})
	keyARN := mustKey(t, s, "ECC_NIST_P256")
	other := mustKey(t, s, "ECC_NIST_P256")
	digest := sha256.Sum256([]byte("x"))
	signBody := jsonBody(map[string]string{"KeyId": keyARN, "Message": b64(digest[:]), "MessageType": "DIGEST", "SigningAlgorithm": "ECDSA_SHA_256"})
	sign := func() response { return do(t, s, request{target: "Sign", body: signBody}) }

	s.SetUnavailable(2)
	for i := range 2 {
		if r := sign(); r.status != 503 || r.typ != "KMSInternalException" {
			t.Errorf("unavailable %d: %d %s", i, r.status, r.raw)
		}
	}
	if r := sign(); r.status != 200 {
		t.Errorf("after the unavailable ones: %s", r.raw)
	}

	s.SetThrottleRate(1)
	if r := sign(); r.status != 400 || r.typ != "ThrottlingException" {
		t.Errorf("throttled: %d %s", r.status, r.raw)
	}
	s.SetThrottleRate(0.5)
	throttled := 0
	for range 200 {
		if sign().typ == "ThrottlingException" {
			throttled++
		}
	}
	if throttled < 60 || throttled > 140 {
		t.Errorf("%d of 200 throttled at rate 0.5", throttled)
	}
	s.SetThrottleRate(0)

	s.SetWrongKeyID(true)
	if r := sign(); r.status != 200 || r.body["KeyId"] != other {
		t.Errorf("wrong key ID: %s", r.raw)
	}
	pk := do(t, s, request{target: "GetPublicKey", body: jsonBody(map[string]string{"KeyId": keyARN})})
	if pk.body["KeyId"] != other {
		t.Errorf("wrong key ID in GetPublicKey: %s", pk.raw)
	}
	s.SetWrongKeyID(false)

	s.SetLatency(100 * time.Millisecond)
	start := time.Now()
	if r := sign(); r.status != 200 || time.Since(start) < 100*time.Millisecond {
		t.Errorf("latency: %s after %v", r.raw, time.Since(start))
	}
	s.SetLatency(0)
	if got := s.Calls("Sign"); got != 2+1+1+200+1+1 {
		t.Errorf("Calls(Sign) = %d", got)
	}
}

// TestSignQuota: the sign quota is a token bucket on Sign alone, answered
// beyond it as AWS answers (HTTP 400, ThrottlingException and its message),
// refilled at its rate, and removable.
func TestSignQuota(t *testing.T) {
	tests := []struct {
		name         string
		rate         float64
		burst, calls int
		wantOK       int
	}{
		{"burst then throttled", 1, 3, 5, 3},
		{"burst at least one", 1, 0, 3, 1},
		{"no quota", 0, 0, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, Options{SignQuota: tt.rate, SignBurst: tt.burst})
			keyARN := mustKey(t, s, "ECC_NIST_P256")
			digest := sha256.Sum256([]byte("x"))
			signBody := jsonBody(map[string]string{"KeyId": keyARN, "Message": b64(digest[:]), "MessageType": "DIGEST", "SigningAlgorithm": "ECDSA_SHA_256"})
			ok := 0
			for range tt.calls {
				switch r := do(t, s, request{target: "Sign", body: signBody}); {
				case r.status == 200:
					ok++
				case r.status != 400 || r.typ != "ThrottlingException" || r.body["message"] != throttleMessage:
					t.Fatalf("beyond the quota: %d %s", r.status, r.raw)
				}
			}
			if ok != tt.wantOK || s.Throttled() != tt.calls-tt.wantOK {
				t.Fatalf("%d of %d signed, %d throttled; want %d signed", ok, tt.calls, s.Throttled(), tt.wantOK)
			}
			// Other operations have quotas of their own.
			if r := do(t, s, request{target: "GetPublicKey", body: jsonBody(map[string]string{"KeyId": keyARN})}); r.status != 200 {
				t.Fatalf("GetPublicKey under the sign quota: %s", r.raw)
			}
		})
	}
	s := start(t, Options{})
	keyARN := mustKey(t, s, "ECC_NIST_P256")
	digest := sha256.Sum256([]byte("x"))
	signBody := jsonBody(map[string]string{"KeyId": keyARN, "Message": b64(digest[:]), "MessageType": "DIGEST", "SigningAlgorithm": "ECDSA_SHA_256"})
	s.SetSignQuota(20, 1) // one token every 50 ms
	if r := do(t, s, request{target: "Sign", body: signBody}); r.status != 200 {
		t.Fatalf("first sign: %s", r.raw)
	}
	if r := do(t, s, request{target: "Sign", body: signBody}); r.typ != "ThrottlingException" {
		t.Fatalf("second sign at once: %s", r.raw)
	}
	time.Sleep(60 * time.Millisecond)
	if r := do(t, s, request{target: "Sign", body: signBody}); r.status != 200 {
		t.Fatalf("after the bucket refilled: %s", r.raw)
	}
	s.SetSignQuota(0, 0)
	for range 5 {
		if r := do(t, s, request{target: "Sign", body: signBody}); r.status != 200 {
			t.Fatalf("quota removed: %s", r.raw)
		}
	}
}

// TestHelpers covers the Go-side helpers tests use.
func TestHelpers(t *testing.T) {
	s := start(t, Options{})
	if _, err := s.CreateKey("HMAC_256"); err == nil {
		t.Error("CreateKey(HMAC_256) succeeded")
	}
	keyARN := mustKey(t, s, "RSA_2048")
	ki, ok := s.Key(keyARN)
	if !ok || ki.ARN != keyARN || ki.KeySpec != "RSA_2048" || ki.KeyUsage != "SIGN_VERIFY" || !ki.Enabled || ki.PublicKey == nil {
		t.Errorf("Key = %+v", ki)
	}
	if err := s.CreateAlias("alias/aws/x", keyARN); err == nil {
		t.Error("CreateAlias accepted an AWS-reserved alias")
	}
	if err := s.CreateAlias("alias/a", "alias/b"); err == nil {
		t.Error("CreateAlias accepted an alias as target")
	}
	if err := s.DisableKey("alias/none"); err == nil {
		t.Error("DisableKey of an unknown alias succeeded")
	}
	if _, ok := s.AliasTarget("alias/none"); ok {
		t.Error("AliasTarget of an unknown alias")
	}
	if _, ok := s.Key("0badc0de-0000-4000-8000-000000000000"); ok {
		t.Error("Key of an unknown key")
	}
	sym := mustKey(t, s, "SYMMETRIC_DEFAULT")
	if ki, _ := s.Key(sym); ki.KeyUsage != "ENCRYPT_DECRYPT" || ki.PublicKey != nil {
		t.Errorf("symmetric key %+v", ki)
	}
	if id := newUUID(); len(id) != 36 || id[14] != '4' || !bytes.ContainsAny([]byte{id[19]}, "89ab") {
		t.Errorf("newUUID() = %q is not a version 4 UUID", id)
	}
}
