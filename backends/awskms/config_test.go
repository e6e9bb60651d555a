//go:build !noawskms

package awskms

import (
	"context"
	"errors"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

func TestNewErrors(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, "")
	tests := []struct {
		name   string
		cfg    Config
		errHas string
	}{
		{"ftp endpoint", Config{Endpoint: "ftp://kms.example"}, "not an http(s)"},
		{"endpoint without host", Config{Endpoint: "https://"}, "not an http(s)"},
		{"endpoint with user info", Config{Endpoint: "https://user:hunter2@kms.example"}, "without user info"},
		{"unsupported KeySpec", Config{KeySpec: "ECC_SECG_P256K1"}, `KeySpec "ECC_SECG_P256K1" is not supported`},
		{"symmetric KeySpec", Config{KeySpec: "SYMMETRIC_DEFAULT"}, "not supported"},
		{"reserved alias", Config{Alias: "alias/aws/cardsign"}, "reserved"},
		{"invalid alias", Config{Alias: "alias/with space"}, "invalid"},
		{"empty alias name", Config{Alias: "alias/"}, "invalid"},
		{"negative rate", Config{RateLimit: -1}, "rate limit"},
		{"NaN rate", Config{RateLimit: math.NaN()}, "rate limit"},
		{"no region", Config{AWSConfig: &aws.Config{Credentials: creds}}, "no AWS Region"},
		{"no credentials", Config{AWSConfig: &aws.Config{Region: "us-east-1"}}, "no credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.AWSConfig == nil {
				tt.cfg.AWSConfig = staticAWSConfig()
			}
			b, err := New(t.Context(), tt.cfg)
			if err == nil {
				_ = b.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("err %q does not mention %q", err, tt.errHas)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err leaks the endpoint's password: %v", err)
			}
			noSecrets(t, "error", err.Error())
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		in        Config
		wantAlias string
		wantRate  float64
	}{
		{Config{}, "", DefaultRateLimit},
		{Config{Alias: "cardsign", RateLimit: 7}, "alias/cardsign", 7},
		{Config{Alias: "alias/cardsign/prod", RateLimit: math.Inf(1)}, "alias/cardsign/prod", math.Inf(1)},
	}
	for _, tt := range tests {
		got, err := tt.in.normalize()
		if err != nil || got.Alias != tt.wantAlias || got.RateLimit != tt.wantRate || got.Logger == nil {
			t.Errorf("normalize(%+v) = %+v, %v; want alias %q rate %v", tt.in, got, err, tt.wantAlias, tt.wantRate)
		}
	}
}

// isolateAWSEnv points the SDK's shared files at nothing and turns IMDS
// off, so that only the variables a test sets count.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, v := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_KMS", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
		"AWS_CA_BUNDLE"} {
		t.Setenv(v, "")
	}
}

// TestDefaultChain: without Config.AWSConfig the standard chain supplies
// credentials and Region (here from the environment), and the SDK still
// does not retry on its own even when AWS_MAX_ATTEMPTS asks it to.
func TestDefaultChain(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_MAX_ATTEMPTS", "10")
	t.Setenv("AWS_RETRY_MODE", "adaptive")

	fake, err := awskmsfake.Start(awskmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	keyARN, err := fake.CreateKey("ECC_NIST_P256")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testsupport.SyncBuffer{}
	b, err := New(t.Context(), Config{Endpoint: fake.URL(), Logger: newTestLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h, err := b.Open(t.Context(), "awskms:///"+keyARN)
	if err != nil {
		t.Fatal(err)
	}
	fake.SetUnavailable(2)
	if _, err := jose.Sign(t.Context(), h.Signer, h.Alg, signingInput(20)); err != nil {
		t.Fatal(err)
	}
	if s, calls := b.Stats(), fake.Calls("Sign"); calls != 3 || s.Attempts != uint64(calls)+2 || s.Retries != 2 {
		t.Errorf("fake saw %d Sign requests, backend %+v: want 3, all of them the backend's", calls, s)
	}
	noSecrets(t, "log", logs.String())
}

// TestRegionRequired: New fails when neither the configuration nor the
// chain names a Region; Config.Region overrides AWSConfig's.
func TestRegionRequired(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	if _, err := New(t.Context(), Config{}); err == nil || !strings.Contains(err.Error(), "no AWS Region") {
		t.Errorf("New without a Region: %v", err)
	}

	e := newEnv(t, Config{Region: "us-east-1", AWSConfig: &aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, ""),
	}}, awskmsfake.Options{})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	e.signVerify(t, e.open(t, "awskms:///"+keyID(keyARN)), keyARN, signingInput(10))
}

// TestCredentialsError: credentials the chain cannot supply give a clear
// error, not a retry loop.
func TestCredentialsError(t *testing.T) {
	e := newEnv(t, Config{AWSConfig: &aws.Config{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no credentials in this test")
		}),
	}}, awskmsfake.Options{})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	_, err := e.b.Open(t.Context(), "awskms:///"+keyARN)
	if err == nil || errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "no credentials in this test") {
		t.Fatalf("Open with failing credentials: %v", err)
	}
	if n := e.fake.Calls("DescribeKey"); n != 0 {
		t.Errorf("an unsigned request reached KMS %d times", n)
	}
	t.Log(err)
}

// TestHTTPClientPool: the idle connection pool is raised for the SDK's own
// clients (none configured, or the BuildableClient the chain makes for
// AWS_CA_BUNDLE) and a caller's own client is used as it is.
func TestHTTPClientPool(t *testing.T) {
	own := &http.Client{}
	tests := []struct {
		name   string
		client aws.HTTPClient
		check  func(b *Backend) bool
	}{
		{"none", nil, func(b *Backend) bool {
			return b.transport != nil && b.transport.MaxIdleConnsPerHost == maxIdleConnsPerHost && b.awsCfg.HTTPClient.(*http.Client).Transport == b.transport
		}},
		{"buildable", awshttp.NewBuildableClient(), func(b *Backend) bool {
			bc, ok := b.awsCfg.HTTPClient.(*awshttp.BuildableClient)
			return ok && b.transport == nil && bc.GetTransport().MaxIdleConnsPerHost == maxIdleConnsPerHost
		}},
		{"own", own, func(b *Backend) bool { return b.transport == nil && b.awsCfg.HTTPClient == own }},
	}
	for _, tt := range tests {
		ac := staticAWSConfig()
		ac.HTTPClient = tt.client
		b, err := New(t.Context(), Config{AWSConfig: ac})
		if err != nil {
			t.Fatal(err)
		}
		if !tt.check(b) {
			t.Errorf("%s: HTTP client %T not set up as expected", tt.name, b.awsCfg.HTTPClient)
		}
		_ = b.Close()
	}
}

// TestSDKLogsOff: a configuration asking the SDK to log requests and
// signing (which include the Authorization header) gets no SDK logs.
func TestSDKLogsOff(t *testing.T) {
	sdkLogs := &testsupport.SyncBuffer{}
	ac := staticAWSConfig()
	ac.Logger = logging.NewStandardLogger(sdkLogs)
	ac.ClientLogMode = aws.LogSigning | aws.LogRequest | aws.LogRequestWithBody | aws.LogResponseWithBody | aws.LogRetries
	e := newEnv(t, Config{AWSConfig: ac}, awskmsfake.Options{})
	keyARN := e.createKey(t, "ECC_NIST_P256")
	e.signVerify(t, e.open(t, "awskms:///"+keyARN), keyARN, signingInput(10))
	if s := sdkLogs.String(); s != "" {
		noSecrets(t, "SDK log", s)
		t.Errorf("the SDK logged: %.300s", s)
	}
}
