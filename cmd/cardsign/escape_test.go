package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/transparency"
)

// hostileText is what a caller or a card can put where cardsign prints a
// name: the OIDC subject of issue 24 (a newline that forges a monitor line,
// then a screen clear), every other kind of character a terminal acts on
// (C0 controls, DEL, C1 controls with the 8-bit CSI, line and paragraph
// separators, a bidi override, a zero-width space, a tag character) and a
// byte of invalid UTF-8.
const hostileText = "oidc:https://token.actions.githubusercontent.com#repo:acme/payments\nMATCH leaf 0 FORGED\x1b[2J" +
	"\x00\a\b\t\r\x7f\u0085\u009b31m\u2028\u2029\u202eevil\u200b\U000E0041\xff"

// rawControls are the characters of hostileText that must never reach the
// output as they are.
var rawControls = []string{"\x1b", "\x00", "\a", "\b", "\t", "\r", "\x7f", "\u0085", "\u009b", "\u2028", "\u2029", "\u202e", "\u200b", "\U000E0041", "\xff"}

// validHostile is hostileText without the invalid byte: what a protobuf
// string (the daemon's answers) can carry.
var validHostile = strings.TrimSuffix(hostileText, "\xff")

// checkEscaped fails the test when out holds a raw control character of
// hostileText, or more lines than want (the newline of hostileText must
// not start one of its own).
func checkEscaped(t *testing.T, what, out string, wantLines int) {
	t.Helper()
	for _, c := range rawControls {
		if strings.Contains(out, c) {
			t.Errorf("%s: %q reaches the output raw:\n%q", what, c, out)
		}
	}
	if n := strings.Count(out, "\n"); n != wantLines {
		t.Errorf("%s: %d lines, want %d:\n%q", what, n, wantLines, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "MATCH leaf 0 FORGED") {
			t.Errorf("%s: forged line %q", what, l)
		}
	}
}

// TestEscapeForms: the one rule in its three forms. Text keeps what is
// printable; a value is bare only when it is a plain word; JSON decodes to
// the same value it encoded.
func TestEscapeForms(t *testing.T) {
	for _, tc := range []struct{ in, text, value string }{
		{"token:ci", "token:ci", "token:ci"},
		{"café agent", "café agent", `"caf\u00e9 agent"`},
		{"", "", `""`},
		{"a\nb", `a\nb`, `"a\nb"`},
		{"\x1b[2J", `\x1b[2J`, `"\x1b[2J"`},
		{"c1 \u0085\u009b", `c1 \u0085\u009b`, `"c1 \u0085\u009b"`},
		{"del\x7f", `del\x7f`, `"del\x7f"`},
		{"ls\u2028ps\u2029", `ls\u2028ps\u2029`, `"ls\u2028ps\u2029"`},
		{"bidi\u202eevil", `bidi\u202eevil`, `"bidi\u202eevil"`},
		{"zw\u200bsp", `zw\u200bsp`, `"zw\u200bsp"`},
		{"tag\U000E0041", `tag\U000e0041`, `"tag\U000e0041"`},
		{"bad\xffbyte", `bad\xffbyte`, `"bad\xffbyte"`},
		{`quo"te`, `quo"te`, `"quo\"te"`},
	} {
		if got := escapeText(tc.in); got != tc.text {
			t.Errorf("escapeText(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := escapeValue(tc.in); got != tc.value {
			t.Errorf("escapeValue(%q) = %q, want %q", tc.in, got, tc.value)
		}
	}
	checkEscaped(t, "escapeText", escapeText(hostileText), 0)
	checkEscaped(t, "escapeValue", escapeValue(hostileText), 0)

	for _, v := range []string{validHostile, "café", "plain", "astral \U0001F600 and tag \U000E0041"} {
		b, err := json.Marshal(map[string]string{"caller": v})
		if err != nil {
			t.Fatal(err)
		}
		out := escapeJSON(b)
		checkEscaped(t, "escapeJSON", string(out), 0)
		var back map[string]string
		if err := json.Unmarshal(out, &back); err != nil || back["caller"] != v {
			t.Errorf("escapeJSON(%s) = %s: decodes to %q (%v), want %q", b, out, back["caller"], err, v)
		}
	}
	if b := []byte(`{"caller":"café"}`); !bytes.Equal(escapeJSON(b), b) {
		t.Errorf("escapeJSON rewrote printable text: %s", escapeJSON(b))
	}
}

// hostileRecord is an audit record whose caller, request id, card and
// reason are hostile.
func hostileRecord(text string) audit.Record {
	return audit.Record{
		Seq: 7, Time: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Outcome: audit.OutcomeRefused, Reason: "policy: " + text,
		Caller: text, RequestID: "req " + text, CardName: "Payments " + text, CardVersion: "1.0" + text,
		CanonicalSHA256: bytes.Repeat([]byte{1}, 32), KID: "k" + text, Alg: "ES256", Profile: "spec", Signature: "sig",
		PrevHash: make([]byte, 32), Hash: make([]byte, 32),
	}
}

// TestAuditListEscapes: issue 24 item 1. audit list printed the caller (an
// OIDC subject) raw, so a newline and ESC[2J in it forged a line and
// cleared the screen. Every field is escaped, in the text and the JSON form.
func TestAuditListEscapes(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		var b strings.Builder
		printRecord(&b, hostileRecord(hostileText), asJSON)
		checkEscaped(t, fmt.Sprintf("printRecord json=%v", asJSON), b.String(), 1)
		if asJSON {
			var m map[string]any
			if err := json.Unmarshal([]byte(b.String()), &m); err != nil || m["caller"] != strings.ToValidUTF8(hostileText, "\ufffd") {
				t.Errorf("audit list --json: caller %q (%v)", m["caller"], err)
			}
		}
	}
	var b strings.Builder
	printRecord(&b, hostileRecord("x kid=forged"), false)
	if !strings.Contains(b.String(), ` caller="x kid=forged" `) {
		t.Errorf("a caller with a space must be one quoted field: %s", b.String())
	}
}

// TestAuditListEscapesAgainstCardsignd: the reported case end to end: the
// record of a refused OIDC caller whose subject holds a newline and an
// escape sequence, in a real cardsignd's SQLite log, listed and verified by
// the cardsign binary.
func TestAuditListEscapesAgainstCardsignd(t *testing.T) {
	clearConnEnv(t)
	clearIDTokenEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(data, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := hostileRecord(validHostile)
	r.Seq, r.PrevHash, r.Hash, r.KID, r.Alg, r.Profile, r.Signature = 0, nil, nil, "", "", "", ""
	if _, err := st.AppendAudit(t.Context(), []audit.Record{r}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	addr := startDaemonOn(t, data)
	list := cardsign(t, dir, nil, "audit", "list", "--server", addr)
	if list.Code != exitOK || !strings.Contains(list.Stdout, `caller="oidc:https://token.actions.githubusercontent.com#repo:acme/payments\nMATCH leaf 0 FORGED\x1b[2J`) {
		t.Fatalf("audit list: exit %d\n%s%s", list.Code, list.Stdout, list.Stderr)
	}
	checkEscaped(t, "audit list", list.Stdout, strings.Count(list.Stdout, "\n"))
	if n := strings.Count(list.Stdout, "\n"); n < 1 || strings.Count(list.Stdout, "outcome=") != n {
		t.Errorf("audit list: a line without a record of its own:\n%s", list.Stdout)
	}
	listJSON := cardsign(t, dir, nil, "audit", "list", "--json", "--server", addr)
	checkEscaped(t, "audit list --json", listJSON.Stdout, strings.Count(list.Stdout, "\n"))
	for _, line := range strings.Split(strings.TrimSpace(listJSON.Stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit list --json: %q: %v", line, err)
		}
		if m["sequence"] == 1.0 && m["caller"] != validHostile {
			t.Errorf("audit list --json changed the caller: %q", m["caller"])
		}
	}
	verify := cardsign(t, dir, nil, "audit", "verify", "--server", addr)
	if verify.Code != exitOK {
		t.Fatalf("audit verify: exit %d\n%s%s", verify.Code, verify.Stdout, verify.Stderr)
	}
}

// TestAgentsPrintEscapes: agents list and history print the registry's
// caller, kids and id as values.
func TestAgentsPrintEscapes(t *testing.T) {
	a := &pb.AgentCard{AgentId: "pay" + validHostile, Version: 2, Visibility: "public" + validHostile, Kids: []string{"k1", "k" + validHostile},
		Caller: validHostile, StoredAt: timestamppb.New(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))}
	for _, asJSON := range []bool{false, true} {
		var b strings.Builder
		printAgent(&b, a, asJSON)
		checkEscaped(t, fmt.Sprintf("printAgent json=%v", asJSON), b.String(), 1)
	}
}

// TestKeysListEscapes: keys list prints kids, URIs and revocation reasons
// that were recorded before they were validated, and the daemon's state
// name (printed raw before).
func TestKeysListEscapes(t *testing.T) {
	var b strings.Builder
	printKeys(&b, []*pb.Key{{Kid: "k" + validHostile, Alg: "ES256", State: "revoked" + validHostile, Uri: "file:" + validHostile,
		RevokedAt: timestamppb.New(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)), RevokeReason: "key-compromise: " + validHostile}})
	checkEscaped(t, "keys list", b.String(), 2)
}

// TestLogMonitorEscapes: a log entry (the log's text, which a hostile log
// or caller chooses) printed by log monitor, as a line and as JSON.
func TestLogMonitorEscapes(t *testing.T) {
	tl := newTestLog(t)
	r := logRecord(1, "")
	r.CardName, r.Caller, r.Hosts, r.KID = "payments-agent\u202e", validHostile, []string{"pay.example.com", "x caller token:ok"}, "k"+validHostile
	r.Hash = audit.Genesis()
	if err := tl.Append(transparency.NewEntry(r, r.Hosts).Marshal()); err != nil {
		t.Fatal(err)
	}
	for _, asJSON := range []bool{false, true} {
		args := []string{"log", "monitor", "--url", tl.logURL(), "--log-key", tl.URL + transparency.KeyPath, "--state", filepath.Join(t.TempDir(), "state.json"), "--watch", "pay.example.com"}
		if asJSON {
			args = append(args, "--json")
		}
		res := runCLI(t, args...)
		if res.Code != exitOK {
			t.Fatalf("log monitor: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		checkEscaped(t, fmt.Sprintf("log monitor json=%v", asJSON), res.Stdout, 2) // the match, the checkpoint
		if !asJSON && !strings.Contains(res.Stdout, `hosts pay.example.com,"x caller token:ok" caller "oidc:`) {
			t.Errorf("log monitor: values not one field each:\n%s", res.Stdout)
		}
	}
}

func TestShowDocumentOnATerminal(t *testing.T) {
	doc := []byte("{\"name\":\"A\u009b2J\u202eB\"}\n")
	var raw, shown bytes.Buffer
	showDocument(&raw, doc, false)
	showDocument(&shown, doc, true)
	if !bytes.Equal(raw.Bytes(), doc) {
		t.Errorf("redirected: %q, want the bytes as stored", raw.Bytes())
	}
	if want := "{\"name\":\"A\\u009b2J\\u202eB\"}\n"; shown.String() != want {
		t.Errorf("on a terminal: %q, want %q", shown.String(), want)
	}
	var a, b map[string]string
	if json.Unmarshal(doc, &a) != nil || json.Unmarshal(shown.Bytes(), &b) != nil || a["name"] != b["name"] {
		t.Errorf("the escaped document is not the same JSON value: %q vs %q", a, b)
	}
	f, err := os.CreateTemp(t.TempDir(), "card")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) || isTerminal(&raw) {
		t.Error("a file or a buffer taken for a terminal")
	}
	if pt, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0); err == nil {
		defer pt.Close()
		if !isTerminal(pt) {
			t.Error("a pseudo-terminal not taken for a terminal")
		}
	}
}
