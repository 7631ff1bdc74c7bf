package daemon_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
	"github.com/ublk-raid/ublk-raid/engine"
)

// rawClient sends requests as curl --unix-socket does.
func rawClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

func rawDo(t *testing.T, hc *http.Client, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// Item 8: a body with anything after its JSON object, a key spelled
// otherwise than documented, or a key given twice is refused with 400
// before the daemon acts on it.
func TestAPIStrictBodies(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	hc := rawClient(sock)
	// An array to aim member operations at.
	if resp, b := rawDo(t, hc, "POST", "/v1/arrays", `{"level":"1","members":["/dev/a","/dev/b"]}`); resp.StatusCode != 201 {
		t.Fatalf("add: %d %s", resp.StatusCode, b)
	}
	before := fake.Requests.Load()
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/v1/arrays", `{"level":"1","members":["/dev/c","/dev/d"]}x`, "data after the JSON object"},
		{"/v1/arrays", `{"level":"1","members":["/dev/c","/dev/d"]} {"level":"0"}`, "data after the JSON object"},
		{"/v1/arrays", `{"level":"1","members":["/dev/c","/dev/d"]}}`, "data after the JSON object"},
		{"/v1/arrays", `{"Level":"1","members":["/dev/c","/dev/d"]}`, `unknown field \"Level\"`},
		{"/v1/arrays", `{"level":"1","MEMBERS":["/dev/c","/dev/d"]}`, `unknown field \"MEMBERS\"`},
		{"/v1/arrays", `{"level":"0","level":"1","members":["/dev/c","/dev/d"]}`, `field \"level\" given twice`},
		{"/v1/arrays", `null`, "not a JSON object"},
		{"/v1/arrays", `[]`, "request body"},
		{"/v1/arrays", "  \n\t", "empty body"},
		{"/v1/arrays", "{\"level\":\"1\",\"members\":[\"/dev/\xff\",\"/dev/d\"]}", "not valid UTF-8"},
		{"/v1/arrays/0/fail", `{"member":"/dev/b"}garbage`, "data after the JSON object"},
		{"/v1/arrays/0/fail", `{"member":"/dev/b"}{"member":"/dev/a"}`, "data after the JSON object"},
		{"/v1/arrays/0/fail", `{"Member":"/dev/b"}`, `unknown field \"Member\"`},
		{"/v1/arrays/0/replace", `{"member":"/dev/b","with":"/dev/c"} 1`, "data after the JSON object"},
	} {
		resp, b := rawDo(t, hc, "POST", tc.path, tc.body)
		if resp.StatusCode != 400 || !strings.Contains(b, tc.want) || strings.Count(strings.TrimSpace(b), "\n") != 2 {
			t.Errorf("POST %s %q: %d %s; want 400 and %q in one line", tc.path, tc.body, resp.StatusCode, b, tc.want)
		}
	}
	if n := fake.Requests.Load() - before; n != 0 {
		t.Fatalf("refused bodies reached the backend %d times", n)
	}
	// Trailing white space is no data; the array is untouched.
	if resp, b := rawDo(t, hc, "POST", "/v1/arrays/0/fail", "{\"member\":\"/dev/b\"}\r\n\t "); resp.StatusCode != 200 || !strings.Contains(b, `"faulty"`) {
		t.Fatalf("fail with trailing white space: %d %s", resp.StatusCode, b)
	}
}

// Item 12: a method an endpoint does not define is 405 with an Allow
// header, on every endpoint, and reaches no backend method.
func TestAPIMethodNotAllowed(t *testing.T) {
	fake := daemontest.New()
	hc := rawClient(daemontest.Serve(t, fake))
	for _, tc := range []struct {
		method, path, allow string
	}{
		{"DELETE", "/v1/version", "GET"},
		{"POST", "/v1/version", "GET"},
		{"PUT", "/v1/version", "GET"},
		{"PUT", "/v1/arrays", "GET, POST, DELETE"},
		{"PATCH", "/v1/arrays", "GET, POST, DELETE"},
		{"POST", "/v1/arrays/0", "GET, DELETE"},
		{"PUT", "/v1/arrays/x", "GET, DELETE"},
		{"GET", "/v1/arrays/0/fail", "POST"},
		{"DELETE", "/v1/arrays/0/remove", "POST"},
		{"GET", "/v1/arrays/0/re-add", "POST"},
		{"GET", "/v1/arrays/0/add-spare", "POST"},
		{"PUT", "/v1/arrays/0/replace", "POST"},
		{"GET", "/v1/arrays/0/check", "POST"},
		{"DELETE", "/v1/arrays/x/repair", "POST"},
	} {
		resp, b := rawDo(t, hc, tc.method, tc.path, "")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != tc.allow || !strings.Contains(b, "method not allowed") {
			t.Errorf("%s %s: %d Allow %q %s; want 405 Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), b, tc.allow)
		}
	}
	if n := fake.Requests.Load(); n != 0 {
		t.Fatalf("405s reached the backend %d times", n)
	}
	if resp, b := rawDo(t, hc, "GET", "/v1/version", ""); resp.StatusCode != 200 || !strings.Contains(b, `"version": "test"`) {
		t.Fatalf("GET /v1/version: %d %s", resp.StatusCode, b)
	}
}

// Item 7: a name that is not UTF-8 text is refused (400), not stored
// altered: neither invalid bytes, nor the U+FFFD that JSON decoding makes
// of them or of a lone surrogate escape, nor control characters.
func TestAPIRefusesBadNames(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	c, hc := daemon.NewClient(sock), rawClient(sock)
	two := []string{"/dev/a", "/dev/b"}
	for _, name := range []string{"t\xffnk", "tank\n", "ta\x00nk", "\x1b[31mred", "t\u0085nk", "t\ufffdnk"} {
		_, err := c.Add(daemon.AddRequest{Level: "1", Members: two, Name: name})
		var re *daemon.RemoteError
		if !errors.As(err, &re) || re.Status != 400 || !strings.HasPrefix(re.Msg, "name ") {
			t.Errorf("name %q: %v, want 400 about the name", name, err)
		}
		if _, err = (daemon.AddRequest{Level: "1", Members: two, Name: name}).Spec(); err == nil || !strings.HasPrefix(err.Error(), "name ") {
			t.Errorf("Spec with name %q: %v, want an error on the name", name, err)
		}
	}
	for _, body := range []string{
		"{\"level\":\"1\",\"members\":[\"/dev/a\",\"/dev/b\"],\"name\":\"t\xffnk\"}",
		`{"level":"1","members":["/dev/a","/dev/b"],"name":"t\ud800nk"}`,
		`{"level":"1","members":["/dev/a","/dev/b"],"name":"t\u0007nk"}`,
	} {
		if resp, b := rawDo(t, hc, "POST", "/v1/arrays", body); resp.StatusCode != 400 {
			t.Errorf("%q: %d %s, want 400", body, resp.StatusCode, b)
		}
	}
	if l, err := c.List(); err != nil || len(l) != 0 {
		t.Fatalf("arrays made from refused requests: %+v %v", l, err)
	}
	if _, err := c.Add(daemon.AddRequest{Level: "1", Members: two, Name: "tänk-1"}); err != nil {
		t.Fatalf("a UTF-8 name: %v", err)
	}
}

// Item 10: the same device given twice, under any name (symlink, .., a
// spare that is a member), is refused by Spec: the CLI and the API share
// it (400 from the API).
func TestSpecSameDeviceTwice(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "m0")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "m1")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(img, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(img, hard); err != nil {
		t.Fatal(err)
	}
	c := daemon.NewClient(daemontest.Serve(t, daemontest.New()))
	for _, tc := range []struct {
		req   daemon.AddRequest
		field string
	}{
		{daemon.AddRequest{Level: "1", Members: []string{"/dev/vda", "/dev/vda"}}, "members"},
		{daemon.AddRequest{Level: "1", Members: []string{"/dev/vda", "/dev/../dev/vda"}}, "members"},
		{daemon.AddRequest{Level: "1", Members: []string{"/dev//vda", "/dev/vda/"}}, "members"},
		{daemon.AddRequest{Level: "1", Members: []string{img, link}}, "members"},
		{daemon.AddRequest{Level: "1", Members: []string{img, hard}}, "members"},
		{daemon.AddRequest{Level: "1", Members: []string{img, other}, Spares: []string{link}}, "spares"},
		{daemon.AddRequest{Level: "1", Members: []string{img, other}, Spares: []string{"/dev/vdx", "/dev/./vdx"}}, "spares"},
		{daemon.AddRequest{Level: "1", Members: []string{img, other}, WriteMostly: []string{img, img}}, "write_mostly"},
		{daemon.AddRequest{Level: "1", Members: []string{img, ""}}, "members"},
	} {
		_, err := tc.req.Spec()
		if err == nil || !strings.HasPrefix(err.Error(), tc.field+" ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v / %v / %v: %v; want a one-line error on %s", tc.req.Members, tc.req.Spares, tc.req.WriteMostly, err, tc.field)
		}
		_, err = c.Add(tc.req)
		var re *daemon.RemoteError
		if !errors.As(err, &re) || re.Status != 400 {
			t.Errorf("API add %v / %v: %v; want 400", tc.req.Members, tc.req.Spares, err)
		}
	}
	if _, err := (daemon.AddRequest{Level: "1", Members: []string{img, other}, Spares: []string{filepath.Join(dir, "m2")}}).Spec(); err != nil {
		t.Fatalf("distinct devices: %v", err)
	}
}

// Every Spec error is a FieldError naming a field of AddRequest by its
// JSON name, in one line.
func TestSpecFieldErrors(t *testing.T) {
	fields := map[string]bool{}
	rt := reflect.TypeOf(daemon.AddRequest{})
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	two := []string{"/dev/a", "/dev/b"}
	neg, big := -2, 1<<20
	for _, req := range []daemon.AddRequest{
		{}, {Level: "1"}, {Level: "4", Members: two}, {Level: "1", Layout: "n2", Members: two},
		{Level: "10", Layout: "z9", Members: two}, {Level: "1", Members: two, ChunkBytes: 3000},
		{Level: "0", Members: two[:1]}, {Level: "1", Members: two, Name: strings.Repeat("n", 33)},
		{Level: "1", Members: two, Number: &neg}, {Level: "1", Members: two, Number: &big},
		{Level: "1", Members: two, Queues: -1}, {Level: "1", Members: two, Depth: 5000},
		{Level: "1", Members: two, MaxIOBytes: 1000}, {Level: "0", Members: two, Spares: []string{"/dev/c"}},
		{Level: "0", Members: two, WriteMostly: two[:1]}, {Level: "1", Members: two, WriteMostly: []string{"/dev/c"}},
		{Level: "1", Members: two, NoBitmap: true, BitmapRegionBytes: 1 << 20},
		{Level: "1", Members: two, BitmapRegionBytes: 3 << 20},
		{Level: "1", Members: two, SyncMinBytes: 10, SyncMaxBytes: 1},
		{Level: "1", Members: []string{"/dev/a\n", "/dev/b"}},
		{Level: "5", Members: two}, {Level: "6", Members: []string{"/dev/a", "/dev/b", "/dev/c"}},
		{Level: "5", Layout: "n2", Members: []string{"/dev/a", "/dev/b", "/dev/c"}},
		{Level: "10", Layout: "ls", Members: two}, {Level: "1", Layout: "ls", Members: two},
		{Level: "5", Members: []string{"/dev/a", "/dev/b", "/dev/c"}, WriteMostly: two[:1]},
		{Level: "6", Members: []string{"/dev/a", "/dev/b", "/dev/c", "/dev/d"}, ChunkBytes: 1 << 30},
	} {
		_, err := req.Spec()
		var fe *daemon.FieldError
		if !errors.As(err, &fe) || !fields[fe.Field] || (fe.Other != "" && !fields[fe.Other]) || strings.Contains(err.Error(), "\n") ||
			!strings.HasPrefix(err.Error(), fe.Field) {
			t.Errorf("%+v: %#v, want a one-line FieldError on a field of AddRequest", req, err)
		}
	}
}

// Item 6, API side: 0 (or absent) still means the default.
func TestAPIZeroIsDefault(t *testing.T) {
	c := daemon.NewClient(daemontest.Serve(t, daemontest.New()))
	a, err := c.Add(daemon.AddRequest{Level: "0", Members: []string{"/dev/a", "/dev/b"}, ChunkBytes: 0})
	if err != nil || a.ChunkBytes != 512<<10 {
		t.Fatalf("chunk_bytes 0: %+v %v, want 512K", a, err)
	}
	s, err := daemon.AddRequest{Level: "1", Members: []string{"/dev/a", "/dev/b"}}.Spec()
	if err != nil || s.RegionSectors != 0 || s.ChunkSectors != 1024 {
		t.Fatalf("defaults: %+v %v", s, err)
	}
}

// raid5/6 requests are validated as the other levels' (members by level,
// layouts of the level, chunk), naming the field at fault; valid ones
// give the spec asked for.
func TestAddRequestParity(t *testing.T) {
	m := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, "/dev/vd"+strconv.Itoa(i))
		}
		return out
	}
	for _, tc := range []struct {
		req         daemon.AddRequest
		field, want string
	}{
		{daemon.AddRequest{Level: "5", Members: m(2)}, "members", "raid5 needs 3 to 64 members, not 2"},
		{daemon.AddRequest{Level: "raid6", Members: m(3)}, "members", "raid6 needs 4 to 64 members, not 3"},
		{daemon.AddRequest{Level: "5", Layout: "n2", Members: m(3)}, "layout", `invalid raid5/6 layout "n2"`},
		{daemon.AddRequest{Level: "6", Layout: "left", Members: m(4)}, "layout", `invalid raid5/6 layout "left"`},
		{daemon.AddRequest{Level: "10", Layout: "ls", Members: m(4)}, "layout", `invalid raid10 layout "ls"`},
		{daemon.AddRequest{Level: "0", Layout: "ra", Members: m(4)}, "layout", "is for raid5, raid6 and raid10 only"},
		{daemon.AddRequest{Level: "5", ChunkBytes: 3000, Members: m(3)}, "chunk_bytes", "power of two"},
		{daemon.AddRequest{Level: "6", ChunkBytes: 128 << 20, Members: m(4)}, "chunk_bytes", "power of two"},
		{daemon.AddRequest{Level: "5", Members: m(3), WriteMostly: m(1)}, "write_mostly", "raid5 reads every member"},
		{daemon.AddRequest{Level: "5", Members: m(3), Depth: 5000}, "depth", "0..4096"},
		{daemon.AddRequest{Level: "5", Members: m(65)}, "members", "raid5 needs 3 to 64 members, not 65"},
	} {
		_, err := tc.req.Spec()
		var fe *daemon.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a FieldError on %s with %q", tc.req, err, tc.field, tc.want)
		}
	}
	for i, l := range []string{"ls", "rs", "la", "ra", "left-symmetric", "right-symmetric", "left-asymmetric", "right-asymmetric"} {
		want := []engine.ParityLayout{engine.LeftSymmetric, engine.RightSymmetric, engine.LeftAsymmetric, engine.RightAsymmetric}[i%4]
		s, err := (daemon.AddRequest{Level: "6", Layout: l, Members: m(4), ChunkBytes: 64 << 10}).Spec()
		if err != nil || s.Level != engine.Level6 || s.ParityLayout != want || s.ChunkSectors != 128 {
			t.Errorf("raid6 layout %s: %+v, %v", l, s, err)
		}
	}
	s, err := (daemon.AddRequest{Level: "raid5", Members: m(64), Spares: []string{"/dev/sdz"}}).Spec()
	if err != nil || s.Level != engine.Level5 || s.ParityLayout != engine.LeftSymmetric || s.ChunkSectors != 1024 || len(s.Spares) != 1 {
		t.Errorf("raid5 with defaults: %+v, %v", s, err)
	}
}
