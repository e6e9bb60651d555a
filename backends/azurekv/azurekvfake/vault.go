package azurekvfake

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// maxBody caps request bodies; Key Vault requests here are small.
const maxBody = 1 << 20

// vault is the Key Vault keys data plane.
type vault struct {
	store  *store
	tokens *tokens
	faults *faults
	done   <-chan struct{} // closed when the server closes
}

// route is a data-plane request: the operation and the key version it is
// about ("" for the latest).
type route struct {
	op      string // CreateKey, GetKey, UpdateKey or Sign
	name    string
	version string
}

// parseRoute maps the paths azkeys sends, including the ones an empty
// version makes ("/keys/NAME/", and "/keys/NAME/sign" for Sign), which
// mean the latest version. A version is never "create" or "sign": it is
// 32 hex digits.
func parseRoute(method, path string) (route, *apiError) {
	rest, ok := strings.CutPrefix(path, "/keys/")
	seg := strings.Split(rest, "/")
	if !ok || seg[0] == "" || len(seg) > 3 {
		return route{}, &apiError{status: http.StatusNotFound, code: "NotFound", message: "azurekvfake serves /keys/{name}[/{version}[/sign]] and /keys/{name}/create only"}
	}
	r := route{name: seg[0]}
	want := ""
	switch {
	case len(seg) == 3 && seg[2] == "sign":
		r.op, r.version, want = "Sign", seg[1], http.MethodPost
	case len(seg) == 2 && seg[1] == "sign" && method == http.MethodPost:
		// azcore's JoinPaths folds the "//" of an empty version away.
		r.op, want = "Sign", http.MethodPost
	case len(seg) == 3:
		return route{}, &apiError{status: http.StatusNotFound, code: "NotFound", message: "azurekvfake does not implement the key operation " + seg[2]}
	case len(seg) == 2 && seg[1] == "create" && method == http.MethodPost:
		r.op, want = "CreateKey", http.MethodPost
	default:
		if len(seg) == 2 {
			r.version = seg[1]
		}
		switch method {
		case http.MethodPatch:
			r.op, want = "UpdateKey", http.MethodPatch
		default:
			r.op, want = "GetKey", http.MethodGet
		}
	}
	if method != want {
		return route{}, &apiError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowed", message: "The method " + method + " is not allowed here."}
	}
	return r, nil
}

// ServeHTTP answers in the order Key Vault would be seen to: the latency,
// then authentication (a 401 challenge counts as a "Challenge", not as a
// call of the operation, and is never faulted), then the injected faults,
// then the operation.
func (v *vault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := v.faults.snapshot()
	if !sleep(r.Context(), v.done, o.Latency) {
		// Drop the connection rather than answer an empty 200: the client
		// gave up, or the server is closing and the call must fail.
		panic(http.ErrAbortHandler)
	}
	if why := v.tokens.check(r); why != authorized {
		v.faults.count("Challenge")
		challenge(w, why)
		return
	}
	rt, aerr := parseRoute(r.Method, r.URL.Path)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	o, f := v.faults.take(rt.op)
	switch f {
	case unavailable:
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "ServiceUnavailable", message: "azurekvfake: injected unavailability: the service is temporarily unavailable."})
		return
	case internalError:
		writeError(w, &apiError{status: http.StatusInternalServerError, code: "InternalServerError", message: "azurekvfake: injected internal error."})
		return
	case throttled:
		w.Header().Set("Retry-After", o.retryAfter())
		writeError(w, &apiError{status: http.StatusTooManyRequests, code: "Throttled", message: "Request was not processed because too many requests were received. Reason: VaultRequestTypeLimitReached (azurekvfake: injected throttling)"})
		return
	}
	if aerr := checkAPIVersion(r.URL.Query().Get("api-version")); aerr != nil {
		writeError(w, aerr)
		return
	}
	var answer any
	switch rt.op {
	case "CreateKey":
		var p createParams
		if aerr = decode(r, &p); aerr == nil {
			answer, aerr = v.store.create(rt.name, &p)
		}
	case "GetKey":
		answer, aerr = v.store.get(rt.name, rt.version)
	case "UpdateKey":
		var p updateParams
		if aerr = decode(r, &p); aerr == nil {
			answer, aerr = v.store.update(rt.name, rt.version, &p)
		}
	case "Sign":
		answer, aerr = v.sign(r, rt)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

func (v *vault) sign(r *http.Request, rt route) (signResult, *apiError) {
	var p signParams
	if aerr := decode(r, &p); aerr != nil {
		return signResult{}, aerr
	}
	digest, err := decodeB64URL(p.Value)
	if err != nil {
		return signResult{}, badParameter("The value of the property 'value' is not base64url: %v", err)
	}
	ver, kid, aerr := v.store.usable(rt.name, rt.version, "sign")
	if aerr != nil {
		return signResult{}, aerr
	}
	sig, aerr := sign(ver, p.Alg, digest)
	if aerr != nil {
		return signResult{}, aerr
	}
	return signResult{KID: kid, Value: base64.RawURLEncoding.EncodeToString(sig)}, nil
}

// checkAPIVersion wants an api-version, as Key Vault does, in either of
// the forms it has used (2025-07-01, 7.4, with -preview suffixes). Its
// value is not checked against a list, so a pinned older SDK still works.
func checkAPIVersion(v string) *apiError {
	if v == "" {
		return badParameter("The 'api-version' query parameter is missing.")
	}
	base, _, _ := strings.Cut(v, "-preview")
	dated := len(base) == 10 && base[4] == '-' && base[7] == '-' && digits(base[:4]+base[5:7]+base[8:])
	major, minor, dotted := strings.Cut(base, ".")
	if !dated && !(dotted && digits(major) && digits(minor)) {
		return badParameter("The specified version (%s) is not recognized.", v)
	}
	return nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// decode reads a JSON request body into p.
func decode(r *http.Request, p any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: "BadParameter", message: "The request body is too large."}
		}
		return badParameter("Reading the request body: %v", err)
	}
	if len(body) == 0 {
		return badParameter("The request body is missing.")
	}
	if err := json.Unmarshal(body, p); err != nil {
		return badParameter("The request body is not valid JSON: %v", err)
	}
	return nil
}
