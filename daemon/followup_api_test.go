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
