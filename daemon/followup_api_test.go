package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// serveFake serves a fake with array 0 (raid1 over /dev/a and /dev/b)
// through the API handler.
func serveFake(t *testing.T) (*daemontest.Backend, http.Handler) {
	t.Helper()
	fake := daemontest.New()
	if _, err := fake.Add(context.Background(), daemon.AddRequest{Level: "1", Members: []string{"/dev/a", "/dev/b"}}); err != nil {
		t.Fatal(err)
	}
	return fake, daemon.NewHandler(fake, "test")
}

// do sends method path with body and returns the status and the error
// message.
func do(h http.Handler, method, path, body string) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	var eb daemon.ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &eb)
	return w.Code, eb.Error
}

// check and repair take no body: one that holds anything is refused
// (400) before the backend is asked, as the strict endpoints refuse
// fields they do not know.
func TestCheckRepairRefuseBody(t *testing.T) {
	fake, h := serveFake(t)
	for _, op := range []string{"check", "repair"} {
		for _, body := range []string{`{"repair": true}`, `{}`, `x`} {
			before := fake.Requests.Load()
			code, msg := do(h, http.MethodPost, "/v1/arrays/0/"+op, body)
			if code != http.StatusBadRequest || msg != "request body: this endpoint takes none" || fake.Requests.Load() != before {
				t.Errorf("POST %s with %q: %d %q (backend asked: %v); want 400 before the backend", op, body, code, msg, fake.Requests.Load() != before)
			}
		}
		// No body, or white space only: the backend is asked (the fake
		// answers 501).
		for _, body := range []string{"", " \n"} {
			if code, msg := do(h, http.MethodPost, "/v1/arrays/0/"+op, body); code != http.StatusNotImplemented {
				t.Errorf("POST %s with %q: %d %q; want the backend's answer", op, body, code, msg)
			}
		}
	}
}

// Relative paths sent by a client other than the CLI (curl) would be
// resolved against the daemon's working directory: they are refused
// (400, naming the field) before the backend is asked.
func TestRelativePathsRefused(t *testing.T) {
	fake, h := serveFake(t)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/arrays", `{"level": "1", "members": ["vdc", "/dev/vdd"]}`, "members vdc: relative path"},
		{"/v1/arrays", `{"level": "1", "members": ["/dev/vdc", "/dev/vdd"], "spares": ["./vde"]}`, "spares ./vde: relative path"},
		{"/v1/arrays/0/fail", `{"member": "b"}`, "member b: relative path"},
		{"/v1/arrays/0/remove", `{"member": "../dev/b"}`, "member ../dev/b: relative path"},
		{"/v1/arrays/0/re-add", `{"member": "b"}`, "member b: relative path"},
		{"/v1/arrays/0/add-spare", `{"member": "e"}`, "member e: relative path"},
		{"/v1/arrays/0/add-spare", `{"member": "1"}`, "member 1: relative path"},
		{"/v1/arrays/0/replace", `{"member": "/dev/b", "with": "e"}`, "with e: relative path"},
	} {
		before := fake.Requests.Load()
		code, msg := do(h, http.MethodPost, tc.path, tc.body)
		// (add's request is checked by the backend, with AddRequest.Spec.)
		asked := tc.path != "/v1/arrays" && fake.Requests.Load() != before
		if code != http.StatusBadRequest || !strings.HasPrefix(msg, tc.want) || asked {
			t.Errorf("POST %s %s: %d %q (backend asked: %v); want 400 %q", tc.path, tc.body, code, msg, asked, tc.want)
		}
	}
	// A role number is no path.
	if code, msg := do(h, http.MethodPost, "/v1/arrays/0/fail", `{"member": "1"}`); code != http.StatusOK {
		t.Errorf("fail by role number: %d %q", code, msg)
	}
}

// A field a member operation does not take is refused, not ignored.
func TestMemberRequestFieldsOfOtherOperations(t *testing.T) {
	fake, h := serveFake(t)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/arrays/0/fail", `{"member": "/dev/b", "with": "/dev/e"}`, "with /dev/e: only replace takes it"},
		{"/v1/arrays/0/fail", `{"member": "/dev/b", "force": true}`, "force: only add-spare and replace take it"},
		{"/v1/arrays/0/fail", `{"members": ["/dev/b"]}`, "members: only add-spare takes several devices"},
		{"/v1/arrays/0/add-spare", `{"member": "/dev/e", "members": ["/dev/f"]}`, "members: give member or members, not both"},
		{"/v1/arrays/0/add-spare", `{"members": ["/dev/e", "/dev/../dev/e"]}`, "members /dev/../dev/e: given twice (as /dev/e)"},
		{"/v1/arrays/0/add-spare", `{"members": ["/dev/e", ""]}`, `members "": empty path`},
	} {
		before := fake.Requests.Load()
		code, msg := do(h, http.MethodPost, tc.path, tc.body)
		if code != http.StatusBadRequest || msg != tc.want || fake.Requests.Load() != before {
			t.Errorf("POST %s %s: %d %q; want 400 %q", tc.path, tc.body, code, msg, tc.want)
		}
	}
}
